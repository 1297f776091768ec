"""The CDI cpuset hook (`kubenode cdi-hook cpuset`, deviceplugin/cdihook.py) on a real cgroup v2 kernel.

On the v1 hybrid hosts the hook is tested for real under podman (tests/cdi); here the v2 rules a fake
tree does not enforce: cpuset files exist only where the parent enables the controller, writes are
checked against the parent's effective set, and the kernel moves the tasks' affinity with cpuset.cpus.
Covered: an absolute cgroupfs path (as a process, the way a runtime runs it), the systemd
`slice:prefix:name` form, and the refusals (CPUs outside the parent's set; no cpuset controller).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from deviceplugin.cdihook import HookError, pin
from kubenode.cgroupsweep import sweep_v2_root
from tests.cgroup2_guest.conftest import Transcript
from tests.cgroup2_guest.support import MOUNT, REPO, cgroup_dir, read, spawn_in

SLEEP = ["sleep", "300"]


def enable_cpuset(cgroup: str) -> None:
    """Create the cgroup, with cpuset enabled in every ancestor's subtree_control on the way down."""
    parent = MOUNT
    for part in Path(cgroup.strip("/")).parts:
        (parent / "cgroup.subtree_control").write_text("+cpuset")
        parent = parent / part
        parent.mkdir(exist_ok=True)


def oci_state(tmp_path: Path, pid: int, cgroups_path: str) -> str:
    (tmp_path / "config.json").write_text(json.dumps({"linux": {"cgroupsPath": cgroups_path}}))
    return json.dumps({"ociVersion": "1.0.2", "pid": pid, "bundle": str(tmp_path)})


@pytest.fixture
def sleeper_in() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait()


def test_hook_process_pins_a_cgroupfs_path(
    v2_root: str, tmp_path: Path, sleeper_in: list[subprocess.Popen[bytes]], transcript: Transcript
) -> None:
    container = f"{v2_root}/pod/ctr"
    enable_cpuset(container)
    sleeper = spawn_in(container, SLEEP)
    sleeper_in.append(sleeper)
    # The console script's body, without site (-S keeps the start short under emulation).
    code = f"import sys; sys.path.insert(0, {str(REPO)!r}); from cli.main import main; sys.exit(main())"
    result = subprocess.run(
        [sys.executable, "-S", "-c", code, "cdi-hook", "cpuset", "--cpus", "1"],
        input=oci_state(tmp_path, sleeper.pid, container),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert read(container, "cpuset.cpus") == "1"
    assert read(container, "cpuset.cpus.effective") == "1"
    assert os.sched_getaffinity(sleeper.pid) == {1}
    transcript.line(f"cdi-hook v2: {container} cpuset.cpus.effective=1, affinity of {sleeper.pid} = {{1}}")


def test_systemd_form_and_refusals(
    v2_root: str, tmp_path: Path, sleeper_in: list[subprocess.Popen[bytes]]
) -> None:
    top = f"knguest{uuid.uuid4().hex[:8]}"
    scope = f"/{top}.slice/{top}-pod.slice/cri-containerd-abc.scope"
    try:
        enable_cpuset(scope)
        sleeper = spawn_in(scope, SLEEP)
        sleeper_in.append(sleeper)
        pin(frozenset({0}), oci_state(tmp_path, sleeper.pid, f"{top}-pod.slice:cri-containerd:abc"))
        assert read(scope, "cpuset.cpus.effective") == "0"
        assert os.sched_getaffinity(sleeper.pid) == {0}

        (cgroup_dir(scope).parent / "cpuset.cpus").write_text("0")  # the pod's slice: CPU 0 only
        with pytest.raises(HookError, match=r"CPUs 1 are outside the parent cgroup's cpuset 0 "):
            pin(frozenset({1}), oci_state(tmp_path, sleeper.pid, f"{top}-pod.slice:cri-containerd:abc"))
        assert read(scope, "cpuset.cpus") == "0"  # unchanged by the refusal

        bare = f"{v2_root}/nocpuset"
        cgroup_dir(v2_root).mkdir()
        cgroup_dir(bare).mkdir()  # v2_root's subtree_control does not enable cpuset: no cpuset files
        other = spawn_in(bare, SLEEP)
        sleeper_in.append(other)
        with pytest.raises(HookError, match="no cpuset controller in"):
            pin(frozenset({0}), oci_state(tmp_path, other.pid, bare))
    finally:
        for process in sleeper_in:
            process.kill()
            process.wait()
        sleeper_in.clear()
        assert not sweep_v2_root(f"/{top}.slice"), "cgroups leaked"
