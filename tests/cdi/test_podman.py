"""CPU pinning through CDI with a real container runtime: podman 4 + runc apply our spec and run our hook.

Every allocation goes through our device manager (the kubelet's Allocate path) to `kubenode deviceplugin`
with CDI on; podman gets exactly the CDI names the plugin answered. This machine has CPUs 0-1, so
allocations of one CPU each are disjoint.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from deviceplugin.cdi import CpusetSpec, spec_file_name
from deviceplugin.hookcommand import HookCommand, hook_command, isolated_argv
from kubenode.cpuset import parse_cpuset
from tests.cdi.conftest import RESOURCE, Node, started_node
from tests.cdi.podman import CGROUP_ROOT, Podman, make_cpuset_parent, remove_cgroups_named
from tests.deviceplugin.support import wait_until

SHOW = (
    "echo cpuset=$(cat /sys/fs/cgroup/cpuset/cpuset.cpus); "
    "grep Cpus_allowed_list /proc/self/status; echo env=$KUBENODE_CPUSET"
)
HOOK = hook_command(None)  # no bundle here: this interpreter, -I -S, on the hook's file


def shown(stdout: str) -> dict[str, str]:
    values = {}
    for line in stdout.splitlines():
        key, sep, value = line.replace(":\t", "=").partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def test_allocate_through_the_device_manager_pins_the_container(podman: Podman, node: Node) -> None:
    _, options = node.allocate(1)
    (name,) = options.cdi_devices
    cpus = options.envs["KUBENODE_CPUSET"]
    assert name == f"kubenode.io/cpuset={cpus}"
    spec = json.loads((podman.cdi_dir / spec_file_name(RESOURCE)).read_text())
    assert spec["cdiVersion"] == "0.5.0" and spec["kind"] == "kubenode.io/cpuset"

    result = podman.run([name], SHOW)

    assert result.returncode == 0, result.stderr
    assert shown(result.stdout) == {"cpuset": cpus, "Cpus_allowed_list": cpus, "env": cpus}


def test_two_containers_on_disjoint_allocations_never_share_a_cpu(podman: Podman, node: Node) -> None:
    """Both busy (two spinning shells each); per-CPU time of each container, read from the host."""
    allocations = [node.allocate(1)[1] for _ in range(2)]
    sets = [parse_cpuset(a.envs["KUBENODE_CPUSET"]) for a in allocations]
    assert not sets[0] & sets[1]
    spin = "(while :; do :; done) & a=$!; (while :; do :; done) & b=$!; echo ready; read x; kill $a $b"
    containers = []
    try:
        for index, allocation in enumerate(allocations):
            parent = f"{podman.cgroup_parent}/spin{index}"
            args = podman.run_args(allocation.cdi_devices, spin, cgroup_parent=parent, interactive=True)
            process = subprocess.Popen(
                podman.command(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            containers.append((process, parent))
        for process, _ in containers:
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        usage_files = [container_usage_file(parent) for _, parent in containers]
        before = [read_usage(path) for path in usage_files]
        # Measure until each container has burnt 0.5 s of CPU time (a deadline, not a fixed sleep).
        assert wait_until(
            lambda: all(sum(read_usage(p)) - sum(b) >= 5e8 for p, b in zip(usage_files, before, strict=True)),
            timeout=20,
            interval=0.05,
        )
        after = [read_usage(path) for path in usage_files]
    finally:
        for process, _ in containers:
            process.communicate(input="stop\n", timeout=30)
    for cpus, start, end in zip(sets, before, after, strict=True):
        per_cpu = [e - s for s, e in zip(start, end, strict=True)]
        inside = sum(per_cpu[cpu] for cpu in cpus)
        outside = sum(per_cpu) - inside
        assert inside >= 5e8, per_cpu
        assert outside <= 0.01 * inside, f"CPU time outside {sorted(cpus)}: {per_cpu}"
    for process, _ in containers:
        assert process.returncode == 0


def container_usage_file(parent: str) -> Path:
    (container,) = (CGROUP_ROOT / "cpuacct" / parent.lstrip("/")).glob("libpod-*")
    return container / "cpuacct.usage_percpu"


def read_usage(path: Path) -> list[int]:
    return [int(value) for value in path.read_text().split()]


def test_foreign_and_malformed_specs_are_left_alone(podman: Podman, node: Node) -> None:
    broken = podman.cdi_dir / "broken.json"
    broken.write_text('{"cdiVersion": "0.5.0", "kind": ')
    foreign = podman.cdi_dir / "example.json"
    foreign.write_text(
        json.dumps(
            {
                "cdiVersion": "0.3.0",
                "kind": "example.com/dongle",
                "devices": [{"name": "a", "containerEdits": {"env": ["DONGLE=a"]}}],
            }
        )
    )
    before = {path: path.read_bytes() for path in (broken, foreign)}
    uid, _ = node.allocate(1)
    _, other = node.allocate(1)
    node.manager.free_pod(uid)  # prunes our file while the others sit beside it
    ours = podman.cdi_dir / spec_file_name(RESOURCE)
    assert wait_until(lambda: len(json.loads(ours.read_text())["devices"]) == 1, timeout=10)

    result = podman.run([*other.cdi_devices, "example.com/dongle=a"], SHOW + "; echo dongle=$DONGLE")

    assert result.returncode == 0, result.stderr
    cpus = other.envs["KUBENODE_CPUSET"]
    assert shown(result.stdout) == {"cpuset": cpus, "Cpus_allowed_list": cpus, "env": cpus, "dongle": "a"}
    assert {path: path.read_bytes() for path in (broken, foreign)} == before


def test_the_entry_of_a_freed_allocation_is_pruned(podman: Podman, node: Node) -> None:
    ours = podman.cdi_dir / spec_file_name(RESOURCE)
    first_uid, first = node.allocate(1)
    second_uid, second = node.allocate(1)

    def names() -> set[str]:
        if not ours.exists():
            return set()
        return {f"kubenode.io/cpuset={d['name']}" for d in json.loads(ours.read_text())["devices"]}

    assert names() == {*first.cdi_devices, *second.cdi_devices}
    node.manager.free_pod(first_uid)
    assert wait_until(lambda: names() == set(second.cdi_devices), timeout=10)
    result = podman.run(first.cdi_devices, "echo started")
    assert result.returncode != 0 and "started" not in result.stdout
    assert first.cdi_devices[0] in result.stderr  # podman: unresolvable CDI devices
    node.manager.free_pod(second_uid)
    assert wait_until(lambda: not ours.exists(), timeout=10)  # a spec without devices is invalid: removed
    assert not list(podman.cdi_dir.glob(".*.tmp"))


def test_hook_refuses_cpus_outside_the_parent_cpuset(podman: Podman) -> None:
    spec = CpusetSpec(podman.cdi_dir, spec_file_name(RESOURCE), HOOK)
    name = spec.add(frozenset({1}))
    narrow = f"{podman.cgroup_parent}/narrow"
    make_cpuset_parent(narrow, "0")

    result = podman.run([name], "echo started", cgroup_parent=narrow)

    assert result.returncode != 0 and "started" not in result.stdout
    assert "kubenode cdi-hook: CPUs 1 are outside the parent cgroup's cpuset 0" in result.stderr


def test_hook_refuses_an_unknown_cgroup(podman: Podman) -> None:
    """A runtime wrapper turns cgroupsPath into the systemd form while runc keeps its cgroupfs driver:
    runc makes a cgroup the path does not name, and the hook must refuse rather than pin nothing."""
    spec = CpusetSpec(podman.cdi_dir, spec_file_name(RESOURCE), HOOK)
    name = spec.add(frozenset({0}))
    wrapper = podman.base / "runc-systemd-path"
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "args = sys.argv[1:]\n"
        "if 'create' in args and '--bundle' in args:\n"
        "    path = os.path.join(args[args.index('--bundle') + 1], 'config.json')\n"
        "    with open(path) as f:\n"
        "        config = json.load(f)\n"
        "    unit = config['linux']['cgroupsPath'].rsplit('/', 1)[1]\n"
        "    config['linux']['cgroupsPath'] = 'kncdimissing.slice:libpod:' + unit\n"
        "    with open(path, 'w') as f:\n"
        "        json.dump(config, f)\n"
        f"os.execv({podman.runc!r}, [{podman.runc!r}, *args])\n"
    )
    wrapper.chmod(0o755)
    started = time.monotonic()
    try:
        result = podman.run([name], "echo started", runtime=str(wrapper))
    finally:
        remove_cgroups_named("kncdimissing.slice:")  # runc's cgroupfs driver took the name as a relative path
    assert result.returncode != 0 and "started" not in result.stdout
    assert "kubenode cdi-hook: unknown cgroup /kncdimissing.slice/libpod-" in result.stderr
    assert time.monotonic() - started < 30


def test_a_spec_left_by_an_earlier_install_is_rewritten_with_this_hook(podman: Podman, cdi_dir: Path) -> None:
    """Issue 44: an earlier clone's `make test` (or an older venv) left our spec file, its hooks naming an
    interpreter and package root that are gone. The plugin adopts the file's sets, rewrites every entry with
    its own hook at start, and a container of a set already in the file is pinned."""
    gone = Path(tempfile.mkdtemp(prefix="kn-cdi-gone-", dir="/tmp"))
    gone.rmdir()  # a path that existed for an earlier install and no longer does
    old_hook = HookCommand(str(gone / "python3.11"), isolated_argv(str(gone / "python3.11"), str(gone)))
    old = CpusetSpec(cdi_dir, spec_file_name(RESOURCE), old_hook)
    for cpu in range(os.cpu_count() or 1):
        old.add(frozenset({cpu}))
    ours = cdi_dir / spec_file_name(RESOURCE)

    with started_node(cdi_dir) as node:
        _, options = node.allocate(1)
        (name,) = options.cdi_devices
        cpus = options.envs["KUBENODE_CPUSET"]
        entries = {f"kubenode.io/cpuset={d['name']}": d for d in json.loads(ours.read_text())["devices"]}
        (hook,) = entries[name]["containerEdits"]["hooks"]
        assert (hook["path"], hook["args"]) == (HOOK.path, HOOK.argv(cpus))
        assert all(str(gone) not in json.dumps(entry) for entry in entries.values())

        result = podman.run([name], SHOW)

        assert result.returncode == 0, result.stderr
        assert shown(result.stdout) == {"cpuset": cpus, "Cpus_allowed_list": cpus, "env": cpus}
        stderr = node.close()
    assert f"CDI entries in {ours} rewritten with this plugin's hook {HOOK.path}" in stderr, stderr
    assert f"(they named: {gone}/python3.11)" in stderr
