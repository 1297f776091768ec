"""The Roles and ClusterRoles under deploy/ grant exactly the verbs the code calls.

One real `kubenode apiserver` with authorization on and `--authorization-policy-file` holding every
RBAC document of deploy/ (as they are). The live scheduler (two verbs' worth of work: bind, fail,
retry, preempt, lead and release its Lease) and the extender (filter, bind, a stale bind) run as
their ServiceAccounts, which only those manifests bind. The server audits every decision about a
subject the file names (apiserver/auth/policyfile.py): a DENY fails the test (a missing verb), and
a verb a role grants but no ALLOW used is reported as unused (a verb too many).
The agent has no Role here: it runs as its node (system:node:<name>), which the Node authorizer
and NodeRestriction govern, as for the kubelet (tests/agent_cluster covers that).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubenode.kubeclient import DEVICE_CLASSES, EVENTS, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES, KubeClient
from tests.scheduler_extender.support import (
    GPU,
    ExtenderProcess,
    extender_entry,
    post,
    wait_until_known,
    write_profile,
)
from tests.scheduler_live.conftest import server_class
from tests.scheduler_live.support import SchedulerProcess, client_for, create_all, node, pod, wait_for

ROOT = Path(__file__).resolve().parents[2]
SCHEDULER_SA = "system:serviceaccount:kube-system:kubenode-scheduler"
EXTENDER_SA = "system:serviceaccount:kube-system:kubenode-scheduler-extender"
SA_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
AUDIT = re.compile(
    r'RBAC (?P<decision>ALLOW|DENY) user="(?P<user>[^"]*)" verb=(?P<verb>\S+) group="(?P<group>[^"]*)"'
    r' resource="(?P<resource>[^"]*)" namespace="(?P<namespace>[^"]*)" name="(?P<name>[^"]*)"'
    r' path="[^"]*"(?: by (?P<binding>\S+) (?P<binding_name>\S+) -> (?P<role_kind>\S+) (?P<role>\S+))?'
)


def rbac_documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(ROOT.glob("deploy/**/*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"):
                docs.append(doc)
    return docs


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    policy = tmp_path_factory.mktemp("policy") / "deploy-rbac.yaml"
    policy.write_text(yaml.safe_dump_all(rbac_documents()))
    with server_class()(args=["--authorization-policy-file", str(policy)]) as server:
        yield server


def audit(apiserver: Any, start: int = 0) -> list[dict[str, str]]:
    return [m.groupdict() for line in apiserver.output[start:] if (m := AUDIT.search(line))]


def unused_grants(lines: list[dict[str, str]], user: str) -> list[str]:
    """`Kind name: verb group/resource` for each verb of a role bound to `user` that no ALLOW used."""
    bound = {
        (doc["roleRef"]["kind"], doc["roleRef"]["name"])
        for doc in rbac_documents()
        if doc["kind"].endswith("Binding")
        and any(f"system:serviceaccount:{s.get('namespace')}:{s['name']}" == user for s in doc["subjects"])
    }
    used = {
        (m["role_kind"], m["role"], m["verb"], m["group"], m["resource"])
        for m in lines
        if m["decision"] == "ALLOW" and m["user"] == user
    }
    unused = []
    for doc in rbac_documents():
        if (doc["kind"], doc["metadata"]["name"]) not in bound:
            continue
        for rule in doc["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        if (doc["kind"], doc["metadata"]["name"], verb, group, resource) not in used:
                            unused.append(
                                f"{doc['kind']} {doc['metadata']['name']}: {verb} {group}/{resource}"
                            )
    return unused


def test_the_policy_file_loads_every_role_of_deploy() -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for d in rbac_documents()}
    assert ("ClusterRole", "kubenode-scheduler") in kinds and (
        "Role",
        "kubenode-scheduler-leader-election",
    ) in kinds
    assert ("ClusterRole", "kubenode-scheduler-extender") in kinds


def test_scheduler_and_extender_roles_are_exactly_what_the_code_uses(apiserver: Any, tmp_path: Path) -> None:
    admin: KubeClient = client_for(apiserver.kubeconfig)
    extender_kubeconfig = apiserver.kubeconfig_for(EXTENDER_SA, SA_GROUPS)
    scheduler_kubeconfig = apiserver.kubeconfig_for(SCHEDULER_SA, SA_GROUPS)
    # kubeconfig_for probes each token with a GET the roles do not grant: audit from here on.
    start = len(apiserver.output)
    extender = ExtenderProcess(extender_kubeconfig)
    profile = write_profile(tmp_path / "profile.yaml", extender_entry(extender.url))
    create_all(admin, [node("only", cpu="3", **{GPU: "1"})])
    wait_until_known(extender.url, ["only"])
    scheduler = SchedulerProcess(
        scheduler_kubeconfig,
        "--leader-elect",
        "--leader-elect-retry-period=1",
        "--profile",
        str(profile),
        log_path=tmp_path / "scheduler.log",
    )
    try:
        # A GPU pod: the extender filters and binds it (GET of the pod, POST of its binding).
        create_all(admin, [pod("gpu", cpu="1", priority=50, extra={GPU: "1"})])
        until(
            apiserver,
            start,
            lambda: admin.get(PODS, "gpu", "default")["spec"].get("nodeName"),
            20,
            "gpu bound by the extender",
        )
        # A /bind for a pod the extender has not seen filtered (a stale uid): it GETs the pod.
        status, answer = post(
            extender.url,
            "bind",
            {"PodName": "gpu", "PodNamespace": "default", "PodUID": str(uuid.uuid4()), "Node": "only"},
        )
        assert status == 200 and "has uid" in answer.get("Error", ""), answer
        # Two pods the scheduler binds (pods/binding, a Scheduled event each).
        create_all(
            admin, [pod("low-1", cpu="1", priority=1, grace=0), pod("low-2", cpu="1", priority=2, grace=0)]
        )
        until(
            apiserver,
            start,
            lambda: all(admin.get(PODS, n, "default")["spec"].get("nodeName") for n in ("low-1", "low-2")),
            20,
            "low pods bound",
        )
        # A pod with a claim: DynamicResources lists and watches slices, classes and claims, and writes
        # the claim's allocation (resourceclaims/status). Priority 200: never a victim below.
        create_dra_objects(admin, "only")
        dra = pod("dra", cpu="0", priority=200)
        dra["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimName": "dev"}]
        create_all(admin, [dra])
        until(
            apiserver,
            start,
            lambda: admin.get(PODS, "dra", "default")["spec"].get("nodeName"),
            20,
            "the pod with a claim bound",
        )
        # A pod that never fits: PodScheduled=False (pods/status patch) and FailedScheduling; a retry
        # with the same message patches the event's count.
        create_all(admin, [pod("huge", cpu="8")])
        until(apiserver, start, lambda: failed(admin, "huge"), 20, "FailedScheduling for huge")
        admin.patch(PODS, "huge", {"metadata": {"labels": {"retry": "1"}}}, "default")
        until(
            apiserver,
            start,
            lambda: (failed(admin, "huge") or [{}])[0].get("count", 1) >= 2,
            20,
            "the event's count raised",
        )
        # A pod that preempts: DisruptionTarget (pods/status), DELETE of the victim, Preempted event.
        create_all(admin, [pod("high", cpu="1", priority=100)])
        until(
            apiserver,
            start,
            lambda: admin.get(PODS, "high", "default")["spec"].get("nodeName"),
            30,
            "high bound after preemption",
        )
    except BaseException:
        print(f"scheduler log:\n{scheduler.log()}\nextender log:\n{extender.log()}")  # shown with the failure
        print("audit:\n" + "\n".join(str(m) for m in audit(apiserver, start) if m["decision"] == "DENY"))
        raise
    finally:
        code = scheduler.stop()  # SIGTERM releases the Lease (its update)
        assert extender.stop() == 0, extender.log()
        admin.close()
    assert code == 0, scheduler.log()
    lines = audit(apiserver, start)
    denied = [m for m in lines if m["decision"] == "DENY" and m["user"] in (SCHEDULER_SA, EXTENDER_SA)]
    assert not denied, "verbs the manifests lack:\n" + "\n".join(map(str, denied)) + "\n" + scheduler.log()
    unused = unused_grants(lines, SCHEDULER_SA) + unused_grants(lines, EXTENDER_SA)
    assert not unused, "verbs the manifests grant that the code never used:\n" + "\n".join(unused)


def create_dra_objects(admin: KubeClient, node_name: str) -> None:
    """A DeviceClass, one device on the node and a claim `dev` asking for it."""
    driver = "dev.example.com"
    selector = {"cel": {"expression": f"device.driver == '{driver}'"}}
    admin.create(DEVICE_CLASSES, {"metadata": {"name": driver}, "spec": {"selectors": [selector]}})
    pool = {"name": node_name, "resourceSliceCount": 1}
    spec = {"driver": driver, "nodeName": node_name, "pool": pool, "devices": [{"name": "dev-0"}]}
    admin.create(RESOURCE_SLICES, {"metadata": {"name": f"{node_name}-dev"}, "spec": spec})
    request = {"name": "dev", "exactly": {"deviceClassName": driver}}
    admin.create(
        RESOURCE_CLAIMS,
        {"metadata": {"name": "dev"}, "spec": {"devices": {"requests": [request]}}},
        "default",
    )


def until(apiserver: Any, start: int, condition: Callable[[], object], timeout: float, what: str) -> None:
    """wait_for, failing at once (naming the request) when the server denies one of ours."""

    def done_or_denied() -> object:
        denied = [m for m in audit(apiserver, start) if m["decision"] == "DENY"]
        assert not denied, f"while waiting for {what}, a verb the manifests lack:\n" + "\n".join(
            map(str, denied)
        )
        return condition()

    wait_for(done_or_denied, timeout, what)


def failed(admin: KubeClient, name: str) -> list[dict[str, Any]]:
    items = admin.list(EVENTS, "default", field_selector=f"involvedObject.name={name}")["items"]
    return [e for e in items if e.get("reason") == "FailedScheduling"]


def test_a_bad_policy_file_stops_the_server_with_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x}\nrules: [{}]\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "apiserver", "--data-dir", str(tmp_path / "data"),
         "--port", "0", "--authorization-policy-file", str(policy)],
        capture_output=True, text=True, timeout=30, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith(f"--authorization-policy-file: {policy}: ClusterRole x: rules[0].verbs: required")
    ), result.stderr
