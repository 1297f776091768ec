"""The DRAPlugin gRPC service (k8s.io/kubelet/pkg/apis/dra v1 and v1beta1 on one socket) of one driver.

NodePrepareResources, per claim: a claim prepared before (its CDI spec is there, holding the answer:
claimspecs.py) answers what it answered then, so a retried or repeated prepare changes nothing ->
otherwise the claim is read from the API server, its UID checked, the allocation's results for this
driver taken (a device this node does not have is the claim's error) -> the claim's CDI spec written
with the answer in it (claimspecs.py; one durable write) -> the devices with their CDI IDs answered. A
failure of one claim is that claim's `error`; the others are prepared. NodeUnprepareResources removes
the spec; a claim never prepared is already unprepared (no error), as the kubelet expects.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import grpc

from deviceplugin.dra.claimspecs import ClaimSpecs, cdi_id
from deviceplugin.dra.inventory import DraDevice
from kubenode.api.dra.v1 import api_pb2 as v1
from kubenode.api.dra.v1 import api_pb2_grpc as v1_grpc
from kubenode.api.dra.v1beta1 import api_pb2 as v1beta1
from kubenode.api.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from kubenode.cpuset import format_cpuset, parse_cpuset
from kubenode.devicecontract import CPUSET_ENV

log = logging.getLogger(__name__)

# (namespace, name) -> the ResourceClaim as JSON; raises on failure (the message is the claim's error)
ClaimGetter = Callable[[str, str], Mapping[str, Any]]
SERVICE_VERSIONS = ("v1.DRAPlugin", "v1beta1.DRAPlugin")  # advertised in GetInfo, preferred first


class PrepareError(Exception):
    """One claim cannot be prepared; the message is its `error`."""


class DriverState:
    """The driver's devices and prepared claims; thread-safe (gRPC calls run on pool threads)."""

    def __init__(
        self,
        driver: str,
        devices: list[DraDevice],
        specs: ClaimSpecs,
        get_claim: ClaimGetter,
    ) -> None:
        self.driver = driver
        self.specs = specs
        self._get_claim = get_claim
        self._lock = threading.Lock()
        self._devices = {d.name: d for d in devices}
        # The claims prepared before a restart: their specs hold the answers (claimspecs.py).
        self.prepared: dict[str, list[dict[str, Any]]] = {
            uid: list(answer) for uid, answer in specs.answers().items()
        }

    def set_devices(self, devices: list[DraDevice]) -> None:
        with self._lock:
            self._devices = {d.name: d for d in devices}

    def prepare(self, namespace: str, uid: str, name: str) -> list[dict[str, Any]]:
        with self._lock:
            if uid in self.prepared:
                return self.prepared[uid]
        try:
            claim = self._get_claim(namespace, name)
        except Exception as exc:
            raise PrepareError(f"reading ResourceClaim {namespace}/{name}: {exc}") from None
        found_uid = str((claim.get("metadata") or {}).get("uid") or "")
        if found_uid != uid:
            raise PrepareError(f"ResourceClaim {namespace}/{name} has UID {found_uid!r}, not {uid!r}")
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results = [
            r
            for r in (allocation.get("devices") or {}).get("results") or []
            if r.get("driver") == self.driver
        ]
        if not results:
            raise PrepareError(f"ResourceClaim {namespace}/{name} has no device of {self.driver} allocated")
        with self._lock:
            unknown = [r.get("device") for r in results if r.get("device") not in self._devices]
            if unknown:
                raise PrepareError(f"ResourceClaim {namespace}/{name}: no device {unknown} on this node")
            names = list(dict.fromkeys(str(r["device"]) for r in results))
            devices = [
                {
                    "requests": [str(r.get("request") or "")],
                    "pool": str(r.get("pool") or ""),
                    "device": str(r["device"]),
                    "cdi": [cdi_id(self.driver, uid, str(r["device"]))],
                }
                for r in results
            ]
            edits = claim_edits(results, self._devices)
            self.specs.write(uid, [(n, edits[n]) for n in names], devices)
            self.prepared[uid] = devices
        log.info("prepared claim %s/%s (%s): %s", namespace, name, uid, ", ".join(names))
        return devices

    def unprepare(self, uid: str) -> None:
        with self._lock:
            self.specs.remove(uid)
            if self.prepared.pop(uid, None) is not None:
                log.info("unprepared claim %s", uid)


def claim_edits(
    results: list[Mapping[str, Any]], devices: Mapping[str, DraDevice]
) -> dict[str, Mapping[str, Any]]:
    """Each allocated device's CDI edits, as the device's, except: optional device nodes (a GPU's control
    devices) that do not exist now are left out; a CPU device's `KUBENODE_CPUSET` names every CPU of its
    request, not only its own: a runtime merges the env of a container's CDI devices with the last one
    winning, so under kubelet 1.37 and containerd 2.4 a two-CPU claim's container saw KUBENODE_CPUSET=1 of
    its 0-1 (the pinning itself is the hooks', each of which pins to all of them: deviceplugin/cdihook.py)."""
    by_request: dict[str, set[int]] = {}
    for r in results:
        by_request.setdefault(str(r.get("request") or ""), set()).update(
            _env_cpus(devices[r["device"]].edits)
        )
    out: dict[str, Mapping[str, Any]] = {}
    for r in results:
        name, request = str(r["device"]), str(r.get("request") or "")
        edits = dict(devices[name].edits)
        optional = set(devices[name].optional_device_nodes)
        if optional:
            # A CDI device node whose host path is missing fails the container (containerd 2.4: "CDI device
            # injection failed: failed to stat CDI host device"): the GPU's control devices go in only where
            # they exist, as the device plugin's gpu backend answers them.
            nodes = edits.get("deviceNodes") or []
            edits["deviceNodes"] = [
                n for n in nodes if _host_path(n) not in optional or os.path.exists(_host_path(n))
            ]
        if _env_cpus(edits):
            env = [e for e in edits.get("env") or [] if not str(e).startswith(f"{CPUSET_ENV}=")]
            edits["env"] = [*env, f"{CPUSET_ENV}={format_cpuset(frozenset(by_request[request]))}"]
        out[name] = edits
    return out


def _host_path(node: Mapping[str, Any]) -> str:
    return str(node.get("hostPath") or node.get("path"))


def _env_cpus(edits: Mapping[str, Any]) -> frozenset[int]:
    for entry in edits.get("env") or []:
        if str(entry).startswith(f"{CPUSET_ENV}="):
            return parse_cpuset(str(entry).split("=", 1)[1])
    return frozenset()


class DraServicer:
    """NodePrepareResources/NodeUnprepareResources for one version's messages (`api` is its api_pb2)."""

    def __init__(self, state: DriverState, api: ModuleType) -> None:
        self.state = state
        self.api = api

    def NodePrepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        response = self.api.NodePrepareResourcesResponse()
        for claim in request.claims:
            entry = response.claims[claim.uid]
            try:
                devices = self.state.prepare(claim.namespace, claim.uid, claim.name)
            except PrepareError as exc:
                log.warning("prepare %s/%s: %s", claim.namespace, claim.name, exc)
                entry.error = str(exc)
                continue
            except OSError as exc:  # the spec or the checkpoint could not be written
                entry.error = f"writing the CDI spec of {claim.namespace}/{claim.name}: {exc}"
                continue
            for d in devices:
                entry.devices.add(
                    request_names=d["requests"],
                    pool_name=d["pool"],
                    device_name=d["device"],
                    cdi_device_ids=d["cdi"],
                )
        return response

    def NodeUnprepareResources(self, request: Any, context: grpc.ServicerContext) -> Any:
        response = self.api.NodeUnprepareResourcesResponse()
        for claim in request.claims:
            entry = response.claims[claim.uid]
            try:
                self.state.unprepare(claim.uid)
            except OSError as exc:
                entry.error = f"removing the CDI spec of {claim.namespace}/{claim.name}: {exc}"
        return response


def add_dra_services(server: grpc.Server, state: DriverState) -> None:
    """Both API versions on one server: the kubelet (or the agent) picks the one GetInfo advertises first."""
    v1_grpc.add_DRAPluginServicer_to_server(DraServicer(state, v1), server)
    v1beta1_grpc.add_DRAPluginServicer_to_server(DraServicer(state, v1beta1), server)
