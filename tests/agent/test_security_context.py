"""securityContext for process pods: the merge and the checks (pure), then real processes in real cgroups."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.container.downwardapi import ContainerConfigError
from agent.container.security import SecurityPolicy
from agent.kuberuntime.capabilities import (
    CAPABILITY_NUMBERS,
    RUNTIME_DEFAULT,
    all_capabilities,
    container_capabilities,
)
from agent.kuberuntime.seccomp import resolve_profile
from agent.kuberuntime.securitycontext import process_security
from agent.lifecycle.admission import admit
from harness.manifests import write_manifest
from kubenode.model import Container, Pod
from tests.agent.support import Harness, wait_until

DEFAULT_CAP_MASK = sum(1 << CAPABILITY_NUMBERS[name] for name in RUNTIME_DEFAULT)


def pod_with(pod_sc: dict[str, Any], container_sc: dict[str, Any]) -> Pod:
    raw = {
        "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
        "spec": {"securityContext": pod_sc, "containers": [{"name": "m", "securityContext": container_sc}]},
    }
    return Pod(name="p", uid="u1", containers=(Container("m", command=("true",)),), raw=raw)


def security(pod_sc: dict[str, Any], container_sc: dict[str, Any], **policy: Any) -> Any:
    pod = pod_with(pod_sc, container_sc)
    return process_security(pod, pod.containers[0], SecurityPolicy(**policy))


@pytest.mark.parametrize(
    ("privileged", "add", "drop", "expected"),
    [
        (False, [], [], RUNTIME_DEFAULT),
        (False, [], ["ALL"], frozenset()),
        (False, ["NET_ADMIN"], ["ALL"], {"NET_ADMIN"}),
        (False, ["CAP_SYS_TIME"], ["chown", "KILL"], (RUNTIME_DEFAULT - {"CHOWN", "KILL"}) | {"SYS_TIME"}),
        (False, ["ALL"], ["NET_ADMIN"], None),  # every capability but NET_ADMIN
        (False, ["KILL"], ["KILL"], RUNTIME_DEFAULT),  # an add wins over a drop of the same name
        (True, [], ["ALL"], "all"),  # privileged: everything, whatever is dropped
    ],
)
def test_capability_sets_as_containerd_computes_them(
    privileged: bool, add: list[str], drop: list[str], expected: Any
) -> None:
    got = container_capabilities(privileged, add, drop)
    if expected is None:
        assert got == all_capabilities() - {"NET_ADMIN"}
    elif expected == "all":
        assert got == all_capabilities()
    else:
        assert got == frozenset(expected)


def test_effective_security_merges_pod_and_container_as_kube_does() -> None:
    s = security(
        {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000, "supplementalGroups": [3000, 2000]},
        {"runAsUser": 1001, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
    )
    assert (s.uid, s.gid, s.groups, s.no_new_privs, s.read_only_root) == (
        1001,
        1000,
        (2000, 3000),
        True,
        True,
    )
    assert s.capabilities == RUNTIME_DEFAULT and s.seccomp_filter is None  # the kubelet's default: Unconfined
    privileged = security({}, {"privileged": True, "allowPrivilegeEscalation": False})
    assert (
        privileged.privileged and not privileged.no_new_privs
    )  # kube never sets no_new_privs when privileged


def test_refusals_carry_the_kubelets_messages() -> None:
    with pytest.raises(
        ContainerConfigError, match=r"container has runAsNonRoot and image will run as root \(pod: "
    ):
        security({"runAsNonRoot": True}, {})
    with pytest.raises(ContainerConfigError, match="container's runAsUser breaks non-root policy"):
        security({"runAsNonRoot": True}, {"runAsUser": 0})
    assert security({"runAsNonRoot": True, "runAsUser": 5}, {}).uid == 5
    with pytest.raises(ContainerConfigError, match="specified privileged container, but is disallowed"):
        security({}, {"privileged": True}, allow_privileged=False)
    with pytest.raises(ContainerConfigError, match="unknown capability to add: 'NOT_A_CAP'"):
        security({}, {"capabilities": {"add": ["NOT_A_CAP"]}})
    with pytest.raises(ContainerConfigError, match="cannot load seccomp profile"):
        resolve_profile(
            {"type": "Localhost", "localhostProfile": "missing.json"}, frozenset(), Path("/nonexistent")
        )
    with pytest.raises(ContainerConfigError, match="must be a relative path"):
        resolve_profile({"type": "Localhost", "localhostProfile": "../etc/x"}, frozenset(), Path("/tmp"))


def test_a_sysctl_refuses_a_process_pod_at_admission() -> None:
    pod = pod_with({"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]}, {})
    rejection = admit(pod, [], {"pods": 10})
    assert rejection is not None and rejection.reason == "SysctlForbidden"
    assert "'kernel.shm_rmid_forced'" in rejection.message


# ----- real processes ------------------------------------------------------------------------------

# The probe file lies on the root filesystem (tmp_path is on it): readOnlyRootFilesystem makes it read-only.
PROBE = (
    "id; grep -E 'NoNewPrivs|CapEff|CapBnd|Seccomp:' /proc/self/status; touch {dir}/$HOSTNAME && echo rw;"
    " echo done; sleep 1000"
)


def manifest(name: str, pod_sc: dict[str, Any], container_sc: dict[str, Any], probe_dir: Path) -> str:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "securityContext": pod_sc,
            "containers": [
                {
                    "name": "m",
                    "image": "none",
                    "command": ["sh", "-c", PROBE.format(dir=probe_dir)],
                    "securityContext": container_sc,
                }
            ],
        },
    }
    return json.dumps(body)


def log_of(state: Path, name: str) -> str:
    logs = list((state / "logs").glob(f"default_{name}_*/m/0.log"))
    return logs[0].read_text() if logs else ""


def status_fields(text: str) -> dict[str, str]:
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key in ("NoNewPrivs", "CapEff", "CapBnd", "Seccomp"):
            fields[key] = value.strip()
    return fields


def test_the_issues_pod_runs_as_it_asks(
    make_harness: Callable[..., Harness], manifests: Path, tmp_path: Path
) -> None:
    harness = make_harness().start()
    state = harness.config.state_dir
    restricted = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    write_manifest(
        manifests,
        "a.yaml",
        manifest("asks", {"runAsUser": 1000, "runAsGroup": 1000, "runAsNonRoot": True}, restricted, tmp_path),
    )
    write_manifest(manifests, "b.yaml", manifest("rootless", {"runAsNonRoot": True}, restricted, tmp_path))
    write_manifest(manifests, "c.yaml", manifest("plain", {}, {}, tmp_path))
    write_manifest(manifests, "d.yaml", manifest("ro", {}, {"readOnlyRootFilesystem": True}, tmp_path))
    text = wait_until(
        lambda: "done" in log_of(state, "asks") and log_of(state, "asks"), 20, "the pod's output"
    )
    assert re.search(r"uid=1000\b.* gid=1000\b", text), text
    assert status_fields(text) == {
        "NoNewPrivs": "1",
        "CapEff": "0000000000000000",
        "CapBnd": "0000000000000000",
        "Seccomp": "2",
    }
    assert "rw" not in text.split()
    read_only = wait_until(
        lambda: "done" in log_of(state, "ro") and log_of(state, "ro"), 20, "the ro pod's output"
    )
    assert (
        "uid=0(root)" in read_only and "Read-only file system" in read_only and "rw" not in read_only.split()
    )
    assert not (tmp_path / "ro").exists() and not (tmp_path / "asks").exists()

    def waiting_reason() -> Any:
        item = harness.pod("rootless")
        statuses = (item or {}).get("status", {}).get("containerStatuses") or [{}]
        return statuses[0].get("state", {}).get("waiting")

    waiting = wait_until(
        lambda: (w := waiting_reason()) and w.get("reason") == "CreateContainerConfigError" and w,
        20,
        "the refusal",
    )
    assert "container has runAsNonRoot and image will run as root" in waiting["message"]

    plain = wait_until(
        lambda: "done" in log_of(state, "plain") and log_of(state, "plain"), 20, "the plain pod's output"
    )
    assert "uid=0(root)" in plain
    # A non-privileged root container holds the runtime's default set, not the agent's.
    fields = status_fields(plain)
    assert int(fields["CapEff"], 16) == DEFAULT_CAP_MASK and int(fields["CapBnd"], 16) == DEFAULT_CAP_MASK
    assert (fields["NoNewPrivs"], fields["Seccomp"]) == ("0", "0")
    assert (tmp_path / "plain").exists()  # its root is writable
