"""Helpers of the container isolation tests (tests/agent/test_container_isolation.py on cgroup v1, and
tests/cgroup2_guest/guest_container_isolation.py in the cgroup v2 guest): a pod whose one container
reports which paths it can open and what its /dev holds, synced once by a real ProcessRuntime in a real
pod cgroup."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agent.cm.cgroups import make_pod_cgroups
from agent.cm.cgroups.api import PodCgroups
from agent.container.downwardapi import HostInfo
from agent.container.podrecord import PodRecord, RecordStore
from agent.container.resources import ContainerResources
from agent.container.security import SecurityPolicy
from agent.container.volumes import MountedVolume
from agent.kuberuntime.runtime import ProcessRuntime
from kubenode.model import Pod
from kubenode.model.parse import parse_pod
from tests.agent.support import wait_until

# What the container reports: whether it opens each path, and what its /dev holds.
PROBE = """
import os, sys, json
out = {"dev": sorted(os.listdir("/dev"))}
for path in sys.argv[1:]:
    try:
        os.close(os.open(path, os.O_WRONLY))  # /dev/kmsg checks syslog rights on a read open
        out[path] = "ok"
    except OSError as exc:
        out[path] = exc.errno
print(json.dumps(out), flush=True)
"""


def probe_pod(name: str, paths: list[str], *, privileged: bool = False, host_dev: bool = False) -> Pod:
    container: dict[str, Any] = {"name": "main", "command": ["python3", "-c", PROBE, *paths]}
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if privileged:
        container["securityContext"] = {"privileged": True}
    if host_dev:
        spec["volumes"] = [{"name": "dev", "hostPath": {"path": "/dev"}}]
        container["volumeMounts"] = [{"name": "dev", "mountPath": "/host-dev"}]
    return parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "uid": f"uid-{name}"},
                      "spec": spec})  # fmt: skip


def run_probe(
    tmp_path: Path,
    cgroups: PodCgroups,
    pod: Pod,
    resources: ContainerResources,
    cdi: Callable[[ContainerResources], ContainerResources] | None = None,
) -> tuple[PodRecord, dict[str, Any]]:
    """Sync the pod once in its real pod cgroup and wait for its one container to end; its report (empty
    where the container was not created)."""
    state = tmp_path / "state"
    runtime = ProcessRuntime(
        state, RecordStore(state), HostInfo("n"), container_cgroups=cgroups, cgroup_pids=cgroups.pids,
        security=SecurityPolicy(True, state / "seccomp"), cdi=cdi,
    )  # fmt: skip
    record = PodRecord(pod.uid, pod.namespace, pod.name)
    info = cgroups.ensure(pod)
    volumes = {"dev": MountedVolume("dev", "/dev")}
    runtime.sync_containers(pod, record, cgroups.procs_files(pod), {"main": resources}, None, volumes,
                            fresh_cgroup=info.created)  # fmt: skip
    main = record.containers["main"]
    if main.reason in ("CreateContainerConfigError", "CreateContainerError"):
        cgroups.destroy(pod.uid)
        return record, {}
    wait_until(lambda: runtime.relist(record) or main.exit_code is not None, 10, "the probe to exit")
    text = Path(main.log_path).read_text()
    cgroups.destroy(pod.uid)
    assert main.exit_code == 0, text
    report: dict[str, Any] = json.loads(text.splitlines()[-1])
    return record, report


def fake_device(directory: Path, numbers: tuple[int, int]) -> str:
    """A character device node made with mknod in `directory` (a device spec's host path)."""
    node = directory / "fakegpu"
    os.mknod(node, 0o020666, os.makedev(*numbers))
    return str(node)


@contextlib.contextmanager
def started_cgroups(root: str) -> Iterator[PodCgroups]:
    made = make_pod_cgroups(root)
    made.start({})
    try:
        yield made
    finally:
        made.stop_and_remove_root()
