"""`kubenode cdi-hook cpuset`: cgroup path forms, cgroup v1 (real, as a process) and v2 (a fake tree), and
every refusal as one line on stderr with a non-zero exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from deviceplugin.cdihook import CpusetHierarchy, HookError, expand_slice, pin, resolve_cgroup
from tests.cdi.podman import CGROUP_ROOT, remove_cgroup_tree

HOOK = [sys.executable, "-m", "cli.main", "cdi-hook"]
KUBEPODS_SCOPE = (
    "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-abc.scope"
)


def run_hook(args: list[str], stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOOK, *args], input=stdin, capture_output=True, text=True, timeout=30)


def bundle_with(tmp_path: Path, cgroups_path: str | None) -> str:
    config = {"ociVersion": "1.0.2", "linux": {} if cgroups_path is None else {"cgroupsPath": cgroups_path}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    return str(tmp_path)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


@pytest.mark.parametrize(
    ("cgroups_path", "expected"),
    [
        ("/kubepods/burstable/pod1/abc", "/kubepods/burstable/pod1/abc"),
        ("/a//b/../c", "/a/c"),
        ("kubepods-besteffort-pod1.slice:cri-containerd:abc", KUBEPODS_SCOPE),
        ("system.slice:crio:abc", "/system.slice/crio-abc.scope"),
        (":libpod:abc", "/system.slice/libpod-abc.scope"),
        ("-.slice:docker:abc", "/docker-abc.scope"),
        ("relative/ctr", "/runtime/own/relative/ctr"),
    ],
)
def test_cgroups_path_forms(cgroups_path: str, expected: str) -> None:
    assert resolve_cgroup(cgroups_path, "/runtime/own") == expected


@pytest.mark.parametrize("bad", ["nodots", "a--b.slice", "a/b.slice", "-a.slice"])
def test_bad_systemd_slices_are_refused(bad: str) -> None:
    with pytest.raises(HookError, match="invalid systemd slice"):
        expand_slice(bad)


def test_cgroup_v2_fake_tree(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """A unified hierarchy at a fake mount point: cpuset.cpus written, the parent's effective set checked."""
    mount = tmp_path / "cgroup2"
    container = mount / "kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope"
    container.mkdir(parents=True)
    (container.parent / "cpuset.cpus.effective").write_text("0-1\n")
    (container / "cpuset.cpus").write_text("")
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self/mountinfo").write_text(
        f"30 22 0:26 / {mount} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
        "31 22 0:27 / /sys/fs/cgroup/hugetlb rw - cgroup cgroup rw,hugetlb\n"
    )
    (proc / "self/cgroup").write_text("0::/\n")
    pid = sleeper.pid
    (proc / str(pid) / "task" / str(pid)).mkdir(parents=True)
    cgroup = "/kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope"
    (proc / str(pid) / "cgroup").write_text(f"0::{cgroup}\n")
    state = json.dumps(
        {"pid": pid, "bundle": bundle_with(tmp_path, "kubepods-pod1.slice:cri-containerd:abc")}
    )

    pin(frozenset({1}), state, proc=str(proc))

    assert (container / "cpuset.cpus").read_text() == "1"
    assert os.sched_getaffinity(pid) == {1}
    with pytest.raises(HookError, match=r"CPUs 2-3 are outside the parent cgroup's cpuset 0-1"):
        pin(frozenset({1, 2, 3}), state, proc=str(proc))
    (proc / str(pid) / "cgroup").write_text("0::/elsewhere\n")
    with pytest.raises(HookError, match=f"container process {pid} is in cgroup /elsewhere, not {cgroup}"):
        pin(frozenset({1}), state, proc=str(proc))


@pytest.fixture
def v1_cgroup() -> Iterator[str]:
    """A parent cgroup of ours in the real cpuset hierarchy (v1 on this host)."""
    name = f"/kncdihook{uuid.uuid4().hex[:8]}"  # made by make_child
    if not (CGROUP_ROOT / "cpuset/cpuset.cpus").exists():
        pytest.fail("needs the cgroup v1 cpuset hierarchy at /sys/fs/cgroup/cpuset (root)", pytrace=False)
    yield name
    remove_cgroup_tree(name)


def make_child(parent: str, relative: str, pid: int) -> Path:
    """Create the cgroup level by level (a v1 cpuset needs cpus and mems before it takes a task)."""
    root = CGROUP_ROOT / "cpuset"
    mems, cpus = (root / "cpuset.mems").read_text(), (root / "cpuset.cpus").read_text()
    directory = root
    for part in (Path(parent.lstrip("/")) / relative).parts:
        directory = directory / part
        if not directory.exists():
            directory.mkdir()
            (directory / "cpuset.mems").write_text(mems)
            (directory / "cpuset.cpus").write_text(cpus)
    (directory / "cgroup.procs").write_text(str(pid))
    return directory


@pytest.mark.cgroup
@pytest.mark.parametrize("form", ["cgroupfs", "systemd"])
def test_pins_a_real_cgroup_v1_process(
    form: str, v1_cgroup: str, sleeper: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    pid = sleeper.pid
    if form == "cgroupfs":
        directory = make_child(v1_cgroup, "ctr", pid)
        cgroups_path = f"{v1_cgroup}/ctr"
    else:  # slice kncdihookX-pod.slice under kncdihookX.slice, our v1_cgroup name without the slash
        top = v1_cgroup.lstrip("/")
        directory = make_child(f"/{top}.slice", f"{top}-pod.slice/kn-ctr.scope", pid)
        cgroups_path = f"{top}-pod.slice:kn:ctr"
    try:
        state = json.dumps({"ociVersion": "1.0.2", "pid": pid, "bundle": bundle_with(tmp_path, cgroups_path)})
        result = run_hook(["cpuset", "--cpus", "1"], state)
        assert (result.returncode, result.stderr) == (0, "")
        assert (directory / "cpuset.cpus").read_text().strip() == "1"
        assert os.sched_getaffinity(pid) == {1}
    finally:
        (CGROUP_ROOT / "cpuset/cgroup.procs").write_text(str(pid))
        if form == "systemd":
            remove_cgroup_tree(f"/{v1_cgroup.lstrip('/')}.slice")


@pytest.mark.cgroup
def test_refusals_are_one_line_and_fail_the_hook(
    v1_cgroup: str, sleeper: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    pid = sleeper.pid
    make_child(v1_cgroup, "ctr", pid)
    try:

        def refusal(args: list[str], state: object, code: int = 1) -> str:
            stdin = state if isinstance(state, str) else json.dumps(state)
            result = run_hook(args, stdin)
            assert result.returncode == code, result.stderr
            return result.stderr.splitlines()[0]

        good = ["cpuset", "--cpus", "1"]
        missing = {"pid": pid, "bundle": bundle_with(tmp_path, f"{v1_cgroup}/nope")}
        assert refusal(good, missing) == (
            f"kubenode cdi-hook: unknown cgroup {v1_cgroup}/nope (linux.cgroupsPath '{v1_cgroup}/nope'): "
            f"no /sys/fs/cgroup/cpuset{v1_cgroup}/nope"
        )
        state = {"pid": pid, "bundle": bundle_with(tmp_path, f"{v1_cgroup}/ctr")}
        assert refusal(["cpuset", "--cpus", "0-7"], state).startswith(
            "kubenode cdi-hook: CPUs 2-7 are outside the parent cgroup's cpuset 0-1"
        )
        assert refusal(good, "not json") == (
            "kubenode cdi-hook: stdin is not the OCI state JSON (is this running as an OCI hook?)"
        )
        assert (
            refusal(good, {"pid": 0, "bundle": "/x"})
            == "kubenode cdi-hook: OCI state: pid 0 is not a process id"
        )
        assert refusal(good, {"pid": pid, "bundle": str(tmp_path / "gone")}).startswith(
            f"kubenode cdi-hook: cannot read {tmp_path / 'gone' / 'config.json'}"
        )
        no_path = {"pid": pid, "bundle": bundle_with(tmp_path, None)}
        assert "no linux.cgroupsPath" in refusal(good, no_path)
        assert refusal(["cpuset", "--cpus", "x"], state, code=2).startswith(
            "kubenode cdi-hook: --cpus: bad CPU"
        )
        assert refusal(["memory"], state, code=2) == "kubenode cdi-hook: unknown hook 'memory'"
    finally:
        (CGROUP_ROOT / "cpuset/cgroup.procs").write_text(str(pid))


def test_mountinfo_picks_the_cpuset_hierarchy() -> None:
    hybrid = (
        "35 25 0:30 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
        "38 25 0:33 /kubepods /sys/fs/cgroup/cpu\\040set rw - cgroup cgroup rw,cpuset\n"
    )
    v1 = CpusetHierarchy.find(hybrid)  # a v1 cpuset hierarchy wins over the unified one (hybrid hosts)
    assert (v1.version, v1.mountpoint, v1.effective_cpus_file) == (
        1,
        "/sys/fs/cgroup/cpu set",
        "cpuset.effective_cpus",
    )
    # The mount shows only /kubepods (e.g. inside a cgroup namespace): paths are relative to it.
    assert v1.directory("/kubepods/pod1/ctr") == "/sys/fs/cgroup/cpu set/pod1/ctr"
    assert v1.cgroup_of("12:cpuset:/kubepods/pod1/ctr\n0::/\n") == "/kubepods/pod1/ctr"
    v2 = CpusetHierarchy.find("30 22 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
    assert (v2.version, v2.directory("/a/b"), v2.cgroup_of("0::/a/b\n")) == (2, "/sys/fs/cgroup/a/b", "/a/b")
    with pytest.raises(HookError, match="no cpuset cgroup hierarchy is mounted"):
        CpusetHierarchy.find("22 1 0:21 / /proc rw - proc proc rw\n")


def test_every_cpuset_hook_of_the_container_pins_to_all_of_them(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """A DRA claim of two CPUs is two CDI devices, each with its own hook (`--cpus 0`, `--cpus 1`); the
    runtime runs both, so each must pin to the union or the last one run wins. Under kubelet 1.37 and
    containerd 2.4 the container of examples/dra/two-cores-one-numa.yaml got only CPU 1 of its 0-1
    (interop/tests/test_dra_driver_under_kubelet.py). Other hooks and broken args are ignored."""
    proc = tmp_path / "proc"
    cgroup_root = tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / str(sleeper.pid)).mkdir()
    (proc / "self/mountinfo").write_text(f"30 1 0:26 / {cgroup_root} rw - cgroup2 cgroup2 rw\n")
    (proc / "self/cgroup").write_text("0::/\n")
    (proc / str(sleeper.pid) / "cgroup").write_text("0::/kubepods/pod1/ctr\n")
    container = cgroup_root / "kubepods/pod1/ctr"
    container.mkdir(parents=True)
    (container.parent / "cpuset.cpus.effective").write_text("0-1\n")
    (container / "cpuset.cpus").write_text("")
    (proc / str(sleeper.pid) / "task" / str(sleeper.pid)).mkdir(parents=True)
    hook = {"path": "/usr/bin/python3", "args": ["python3", "-I", "-S", "-c", "boot", "/pkg", "cpuset"]}
    config = {
        "ociVersion": "1.0.2",
        "linux": {"cgroupsPath": "/kubepods/pod1/ctr"},
        "hooks": {
            "createRuntime": [
                {**hook, "args": [*hook["args"], "--cpus", "0"]},
                {"path": "/usr/bin/nvidia-cdi-hook", "args": ["nvidia-cdi-hook", "update-ldcache"]},
                {**hook, "args": [*hook["args"], "--cpus=1"]},
                {**hook, "args": [*hook["args"], "--cpus", "not-a-list"]},
            ]
        },
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    state = json.dumps({"ociVersion": "1.0.2", "pid": sleeper.pid, "bundle": str(tmp_path)})
    pin(frozenset({1}), state, proc=str(proc))  # the second hook's run: it pins to 0 and 1
    assert (container / "cpuset.cpus").read_text() == "0-1"
    assert os.sched_getaffinity(sleeper.pid) == {0, 1}
