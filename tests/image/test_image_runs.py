"""The image, built here, runs what the manifests run: `kubenode --version`; the device plugin DaemonSet's
containers (init and plugin, with their securityContext and mounts) against `kubenode conformance` as the
kubelet; the agent DaemonSet's container with the host's cgroups, running a manifest pod in its cgroup."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.cdi.podman import CGROUP_ROOT, remove_cgroup_tree
from tests.deviceplugin.support import wait_until
from tests.image.conftest import Image
from tests.image.daemonset import config_map, run_args, write_config

KUBENODE = (sys.executable, "-m", "cli.main")  # the host's kubenode plays the kubelet
PLUGIN_MANIFEST = "deviceplugin-daemonset.yaml"
AGENT_MANIFEST = "agent-daemonset.yaml"
PLUGIN_HOST_PATHS = (
    "/var/lib/kubelet/device-plugins",
    "/var/lib/kubelet/pod-resources",
    "/var/run/cdi",
    "/opt/kubenode/cdi-hook",
)

# A session's first test also builds the image (about a minute on 2 cores).
pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kn-imgtest-", dir="/tmp") as directory:
        yield Path(directory)


def host_dirs(base: Path, paths: tuple[str, ...]) -> dict[str, Path]:
    """A directory of the test for each of the manifest's host paths."""
    dirs = {}
    for path in paths:
        dirs[path] = base / "host" / path.strip("/").replace("/", "_")
        dirs[path].mkdir(parents=True)
    return dirs


def test_version(image: Image) -> None:
    result = image.run("--network=none", image.tag, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "kubenode 0.1.0"
    print(f"image {image.tag}: {image.size_bytes / 1e6:.0f} MB, built in {image.build_seconds:.0f} s")


def test_deviceplugin_daemonset_passes_conformance(image: Image, scratch: Path) -> None:
    dirs = host_dirs(scratch, PLUGIN_HOST_PATHS)
    config_dir = scratch / "config"
    write_config(config_dir, "config", config_map(PLUGIN_MANIFEST))
    init = run_args(PLUGIN_MANIFEST, "install-cdi-hook", image.tag, dirs, config_dir)
    installed = image.run(*init)
    assert installed.returncode == 0, installed.stderr
    assert (dirs["/opt/kubenode/cdi-hook"] / "hook.json").is_file()
    plugin = run_args(PLUGIN_MANIFEST, "deviceplugin", image.tag, dirs, config_dir)
    name = f"kn-imgtest-{uuid.uuid4().hex[:8]}"
    command = "exec " + shlex.join(image.run_command(f"--name={name}", *plugin))
    kubelet_dir = dirs["/var/lib/kubelet/device-plugins"]
    try:
        result = subprocess.run(
            [*KUBENODE, "conformance", "--kubelet-dir", str(kubelet_dir), "--plugin-cmd", command],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        image.podman.run("rm", "--force", "--time=0", name, check=False)
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kubenode.io/cpu" in result.stdout


@pytest.fixture
def cgroup_root() -> Iterator[str]:
    root = f"/kn-imgtest-{uuid.uuid4().hex[:8]}"
    yield root
    for directory in sorted(CGROUP_ROOT.glob(f"*/{root.lstrip('/')}")):
        for procs in directory.rglob("cgroup.procs"):
            for pid in procs.read_text().split():
                os.kill(int(pid), signal.SIGKILL)
    assert wait_until(
        lambda: (
            not any(p.read_text().strip() for p in CGROUP_ROOT.glob(f"*/{root.lstrip('/')}/**/cgroup.procs"))
        ),
        timeout=10,
    )
    remove_cgroup_tree(root)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_agent_daemonset_runs_a_manifest_pod_in_its_cgroup(
    image: Image, scratch: Path, cgroup_root: str
) -> None:
    dirs = host_dirs(scratch, ("/etc/kubenode/manifests", "/var/lib/kubenode", "/sys/fs/cgroup"))
    dirs["/sys/fs/cgroup"] = CGROUP_ROOT  # the host's cgroups, as the DaemonSet mounts them
    config = yaml.safe_load(config_map(AGENT_MANIFEST)["agent.yaml"])
    config.update(cgroupRoot=cgroup_root, listen=f"127.0.0.1:{free_port()}")  # ours alone on this machine
    config_dir = scratch / "config"
    write_config(config_dir, "config", {"agent.yaml": yaml.safe_dump(config)})
    (dirs["/etc/kubenode/manifests"] / "idle.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: idle}\n"
        "spec:\n  containers:\n    - {name: sleeper, image: busybox, command: [sleep, '3600']}\n"
    )
    name = f"kn-imgtest-{uuid.uuid4().hex[:8]}"
    agent = run_args(AGENT_MANIFEST, "agent", image.tag, dirs, config_dir, env={"NODE_NAME": "imgtest"})
    process = subprocess.Popen(image.run_command(f"--name={name}", *agent), stderr=subprocess.PIPE, text=True)
    pods = CGROUP_ROOT / "cpu" / cgroup_root.lstrip("/") / "kubepods" / "besteffort"
    try:
        # The agent's child joins the pod cgroup before it execs: wait for the pod's own command there.
        found: list[tuple[Path, int]] = []

        def running() -> bool:
            found[:] = _sleepers(pods)
            return bool(found)

        wait_until(running, timeout=120, interval=0.1)
    finally:
        image.podman.run("stop", "--time=10", name, check=False)
        _, stderr = process.communicate(timeout=60)
    assert found, f"no `sleep 3600` in a pod cgroup under {pods}: {stderr}"
    [(pod_cgroup, _)] = found
    assert pod_cgroup.name.startswith("pod")


def _sleepers(pods: Path) -> Iterator[tuple[Path, int]]:
    """(pod cgroup, pid) for each `sleep 3600` in a pod cgroup (or a container cgroup below it)."""
    if not pods.is_dir():
        return
    for procs in pods.glob("pod*/**/cgroup.procs"):
        pod = procs.parent
        while not pod.name.startswith("pod"):
            pod = pod.parent
        for pid in procs.read_text().split():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"3600"]:
                    yield pod, int(pid)
