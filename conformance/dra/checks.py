"""The DRA checks, in the order they run: registration, versions, the driver's ResourceSlices, prepare
and unprepare of a claim the suite allocates against those slices, the CDI IDs answered, idempotence,
unknown claims, re-registration after the registry directory is recreated.

Each check returns a detail line on success and raises Fail or Skip (conformance/target.py); Skip only where
an earlier check it builds on did not pass. The suite's API server is the embedded kubenode apiserver
(conformance/dra/apiserver.py), which serves resource.k8s.io/v1: a 404 for the group fails dra.slices.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.dra.target import DraTarget, is_socket
from conformance.target import Fail, Skip
from kubenode.cdi.registry import load_registry
from kubenode.kubeclient import RESOURCE_CLAIMS, RESOURCE_SLICES, NotFound

GROUP_PATH = "/apis/resource.k8s.io/v1"
NAMESPACE = "default"


@dataclass(frozen=True)
class DraCheck:
    name: str
    run: Callable[[DraTarget, dict[str, Any]], str]
    about: str


def check_info(t: DraTarget, memo: dict[str, Any]) -> str:
    info = t.get_info(t.waits.register)
    if info.type != "DRAPlugin":
        raise Fail(f"GetInfo type is {info.type!r}, not 'DRAPlugin'")
    if not info.name:
        raise Fail("GetInfo names no driver")
    if not info.endpoint.startswith("/") or not is_socket(Path(info.endpoint)):
        raise Fail(f"GetInfo endpoint {info.endpoint!r} is not an absolute path to a socket")
    return f"{info.name} on {info.endpoint} ({', '.join(info.supported_versions)})"


def check_notify(t: DraTarget, memo: dict[str, Any]) -> str:
    t.notify(True)
    return "NotifyRegistrationStatus(registered) accepted"


def check_versions(t: DraTarget, memo: dict[str, Any]) -> str:
    versions = t.versions()
    if not versions:
        raise Fail(f"none of {list(t.info.supported_versions)} is v1.DRAPlugin or v1beta1.DRAPlugin")
    for version in versions:
        t.call(version, "prepare", [])
    memo["version"] = versions[0]
    return f"served: {', '.join(versions)}"


def _group(t: DraTarget) -> None:
    try:
        t.client.request("GET", GROUP_PATH)
    except NotFound:
        raise Fail(f"the embedded API server answers 404 for {GROUP_PATH}") from None


def check_slices(t: DraTarget, memo: dict[str, Any]) -> str:
    _group(t)
    deadline = time.monotonic() + t.waits.slices
    while True:
        ours = [
            s
            for s in t.client.list(RESOURCE_SLICES).get("items") or []
            if (s.get("spec") or {}).get("driver") == t.driver
            and (s.get("spec") or {}).get("nodeName") == t.node
        ]
        devices = [(s, d) for s in ours for d in (s["spec"].get("devices") or [])]
        if devices:
            break
        if time.monotonic() > deadline:
            raise Fail(
                f"no ResourceSlice of {t.driver} for node {t.node} with devices within {t.waits.slices:g} s"
            )
        time.sleep(0.2)
    slice_, device = devices[0]
    memo["device"] = (slice_["spec"]["pool"]["name"], device["name"])
    pools = sorted({s["spec"]["pool"]["name"] for s in ours})
    return f"{len(ours)} slice(s), pools {pools}, {len(devices)} device(s)"


def check_prepare(t: DraTarget, memo: dict[str, Any]) -> str:
    if "device" not in memo or "version" not in memo:
        raise Skip("needs a published device and a served version")
    pool, device = memo["device"]
    name = f"conformance-{uuid.uuid4().hex[:8]}"
    made = t.client.create(
        RESOURCE_CLAIMS, {"metadata": {"name": name}, "spec": {"devices": {"requests": []}}}, NAMESPACE
    )
    uid = made["metadata"]["uid"]
    made["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "r", "driver": t.driver, "pool": pool, "device": device}]}
        },
        "reservedFor": [{"resource": "pods", "name": "conformance", "uid": str(uuid.uuid4())}],
    }
    t.client.update(RESOURCE_CLAIMS, made, subresource="status")
    t.claims_made.append((name, uid))
    answer = t.call(memo["version"], "prepare", [(NAMESPACE, uid, name)]).claims
    if uid not in answer:
        raise Fail("NodePrepareResources did not answer for the claim")
    if answer[uid].error:
        raise Fail(f"prepare of an allocated claim failed: {answer[uid].error}")
    got = [(d.pool_name, d.device_name) for d in answer[uid].devices]
    if got != [(pool, device)]:
        raise Fail(f"prepared devices {got}, allocated {[(pool, device)]}")
    memo["claim"] = (name, uid)
    memo["cdi"] = [i for d in answer[uid].devices for i in d.cdi_device_ids]
    return f"claim {name}: {device} -> {memo['cdi']}"


def check_cdi(t: DraTarget, memo: dict[str, Any]) -> str:
    if "cdi" not in memo:
        raise Skip("needs a prepared claim")
    if not memo["cdi"]:
        return "the driver answers no CDI IDs (allowed)"
    registry = load_registry([t.dirs.cdi])
    missing = [i for i in memo["cdi"] if i not in registry.devices]
    if missing:
        raise Fail(
            f"CDI IDs without a spec in {t.dirs.cdi}: {missing}; {'; '.join(registry.errors) or 'no errors'}"
        )
    return f"{len(memo['cdi'])} CDI ID(s) resolve in {t.dirs.cdi}"


def check_idempotent(t: DraTarget, memo: dict[str, Any]) -> str:
    if "claim" not in memo:
        raise Skip("needs a prepared claim")
    name, uid = memo["claim"]
    answer = t.call(memo["version"], "prepare", [(NAMESPACE, uid, name)]).claims[uid]
    again = [i for d in answer.devices for i in d.cdi_device_ids]
    if answer.error or again != memo["cdi"]:
        raise Fail(f"a second prepare answered {again} (error {answer.error!r}), the first {memo['cdi']}")
    return "the same devices and CDI IDs"


def check_unprepare(t: DraTarget, memo: dict[str, Any]) -> str:
    if "claim" not in memo:
        raise Skip("needs a prepared claim")
    name, uid = memo["claim"]
    answer = t.call(memo["version"], "unprepare", [(NAMESPACE, uid, name)]).claims
    if uid not in answer or answer[uid].error:
        raise Fail(f"unprepare failed: {answer[uid].error if uid in answer else 'no answer for the claim'}")
    left = [i for i in memo["cdi"] if i in load_registry([t.dirs.cdi]).devices]
    return "unprepared" + (f"; CDI IDs still resolving: {left}" if left else "; its CDI specs are gone")


def check_unprepare_unknown(t: DraTarget, memo: dict[str, Any]) -> str:
    if "version" not in memo:
        raise Skip("needs a served version")
    uid = str(uuid.uuid4())
    answer = t.call(memo["version"], "unprepare", [(NAMESPACE, uid, "never-prepared")]).claims
    if uid in answer and answer[uid].error:
        raise Fail(f"unprepare of a claim never prepared failed: {answer[uid].error}")
    return "a claim never prepared counts as unprepared"


def check_prepare_unknown(t: DraTarget, memo: dict[str, Any]) -> str:
    if "version" not in memo:
        raise Skip("needs a served version")
    uid = str(uuid.uuid4())
    try:
        answer = t.call(memo["version"], "prepare", [(NAMESPACE, uid, "no-such-claim")]).claims
    except Fail as exc:
        return f"refused as a call: {exc}"
    if uid in answer and answer[uid].error:
        return f"refused for the claim: {answer[uid].error[:120]}"
    raise Fail("a claim that does not exist was prepared")


def check_reregister(t: DraTarget, memo: dict[str, Any]) -> str:
    if t.info is None:
        raise Skip("needs a registered driver")
    shutil.rmtree(t.dirs.registry)
    t.dirs.registry.mkdir(parents=True)
    started = time.monotonic()
    before = t.driver
    info = t.get_info(t.waits.reregister)
    if info.name != before:
        raise Fail(f"re-registered as {info.name!r}, was {before!r}")
    return f"registered again {time.monotonic() - started:.2f} s after the directory was recreated"


CHECKS = (
    DraCheck(
        "dra.register.info", check_info, "a registration socket appears; GetInfo: DRAPlugin, a name, a socket"
    ),
    DraCheck("dra.register.notify", check_notify, "NotifyRegistrationStatus is accepted"),
    DraCheck("dra.versions", check_versions, "a supported service version; each advertised one answers"),
    DraCheck("dra.slices", check_slices, "the driver publishes ResourceSlices with devices for its node"),
    DraCheck("dra.prepare", check_prepare, "a claim allocated on its slices is prepared with those devices"),
    DraCheck("dra.prepare.cdi", check_cdi, "the CDI IDs answered point at specs that exist and parse"),
    DraCheck("dra.prepare.idempotent", check_idempotent, "preparing again answers the same"),
    DraCheck("dra.unprepare", check_unprepare, "the claim is unprepared"),
    DraCheck(
        "dra.unprepare.unknown", check_unprepare_unknown, "unprepare of a claim never prepared succeeds"
    ),
    DraCheck(
        "dra.prepare.unknown", check_prepare_unknown, "prepare of a claim that does not exist is refused"
    ),
    DraCheck("dra.reregister", check_reregister, "registers again after the registry directory is recreated"),
)
