"""CPU pinning from the DaemonSet alone: its init container installs the CDI hook on the "host", its plugin
container (exactly the manifest's securityContext and mounts) registers with a kubelet (our device manager,
with its PodResources socket), and a container started on the host with the CDI name Allocate answered is
pinned by the hook the DaemonSet put at /opt/kubenode/cdi-hook.

The "host" is podman in a private mount namespace (tests/cdi/podman.py) where the DaemonSet's host paths
/var/run/cdi and /opt/kubenode/cdi-hook are this test's directories; runc runs the hook there, by the path
the spec names. The hook's interpreter and libraries are the image's (copied), not the machine's.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.cm.devicemanager import DeviceManager, PodRef
from deviceplugin.hookcommand import BOOTSTRAP
from tests.cdi.podman import CGROUP_ROOT, Podman, make_cpuset_parent
from tests.cdi.test_podman import SHOW, shown
from tests.deviceplugin.support import wait_until
from tests.image.conftest import Image
from tests.image.daemonset import config_map, run_args, write_config
from tests.image.test_image_runs import PLUGIN_HOST_PATHS, PLUGIN_MANIFEST, host_dirs

HOOK_DIR = "/opt/kubenode/cdi-hook"
RESOURCE = "kubenode.io/cpu"

# A session's first test also builds the image (about a minute on 2 cores).
pytestmark = pytest.mark.timeout(600)


class DaemonSetNode:
    """The host's paths, the kubelet side, and the DaemonSet's two containers run from the image."""

    def __init__(self, image: Image, base: Path) -> None:
        self.image = image
        self.dirs = host_dirs(base, PLUGIN_HOST_PATHS)
        self.host = Podman(binds={HOOK_DIR: self.dirs[HOOK_DIR]})
        self.dirs["/var/run/cdi"] = self.host.cdi_dir  # what the host's podman reads as /var/run/cdi
        self.manager = DeviceManager(
            self.dirs["/var/lib/kubelet/device-plugins"],
            base / "state",
            podresources_socket=self.dirs["/var/lib/kubelet/pod-resources"] / "kubelet.sock",
            rpc_timeout=10.0,
        )
        self.manager.start()
        self.name = f"kn-imgtest-{uuid.uuid4().hex[:8]}"
        self.plugin: subprocess.Popen[str] | None = None
        config_dir = base / "config"
        write_config(config_dir, "config", config_map(PLUGIN_MANIFEST))
        installed = image.run(
            *run_args(PLUGIN_MANIFEST, "install-cdi-hook", image.tag, self.dirs, config_dir)
        )
        assert installed.returncode == 0, installed.stderr
        plugin = run_args(PLUGIN_MANIFEST, "deviceplugin", image.tag, self.dirs, config_dir)
        self.plugin = subprocess.Popen(
            image.run_command(f"--name={self.name}", *plugin), stderr=subprocess.PIPE, text=True
        )
        if not self.manager.wait_for_resource(RESOURCE, 60):
            raise AssertionError(f"the plugin container did not register: {self.close()}")

    def allocate(self) -> tuple[str, str]:
        """(CDI name, CPU list) of a fresh one-CPU allocation through the kubelet's Allocate path."""
        uid = uuid.uuid4().hex
        options = self.manager.allocate(PodRef(uid, "default", f"pod-{uid[:6]}"), "main", {RESOURCE: 1})
        (name,) = options.cdi_devices
        return name, options.envs["KUBENODE_CPUSET"]

    def close(self) -> str:
        self.image.podman.run("stop", "--time=10", self.name, check=False)
        stderr = ""
        if self.plugin is not None:
            _, stderr = self.plugin.communicate(timeout=60)
        self.manager.stop()
        self.host.close()
        return stderr


@pytest.fixture
def node(image: Image) -> Iterator[DaemonSetNode]:
    with tempfile.TemporaryDirectory(prefix="kn-imgcdi-", dir="/tmp") as base:
        node = DaemonSetNode(image, Path(base))
        try:
            yield node
        finally:
            node.close()


def test_container_on_the_host_is_pinned_by_the_daemonset_hook(node: DaemonSetNode) -> None:
    name, cpus = node.allocate()
    [spec_file] = node.host.cdi_dir.glob("kubenode-cpuset_*.json")
    [hook] = json.loads(spec_file.read_text())["devices"][0]["containerEdits"]["hooks"]
    assert hook["path"].startswith(
        f"{HOOK_DIR}/lib/ld-"
    )  # the DaemonSet's copy of the loader, not the host's
    assert hook["args"][-8:-3] == ["-I", "-S", "-c", BOOTSTRAP, f"{HOOK_DIR}/pkg"]
    assert hook["args"][-3:] == ["cpuset", "--cpus", cpus]

    result = node.host.run([name], SHOW)
    assert result.returncode == 0, result.stderr
    assert shown(result.stdout) == {"cpuset": cpus, "Cpus_allowed_list": cpus, "env": cpus}

    # Busy on two threads for 0.3 s of CPU time: every nanosecond on the allocated CPU.
    parent = f"{node.host.cgroup_parent}/spin"
    spin = "(while :; do :; done) & a=$!; (while :; do :; done) & b=$!; echo ready; read x; kill $a $b"
    args = node.host.run_args([name], spin, cgroup_parent=parent, interactive=True)
    process = subprocess.Popen(
        node.host.command(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        (container,) = (CGROUP_ROOT / "cpuacct" / parent.lstrip("/")).glob("libpod-*")
        usage = container / "cpuacct.usage_percpu"
        start = [int(v) for v in usage.read_text().split()]
        assert wait_until(lambda: sum(map(int, usage.read_text().split())) - sum(start) >= 3e8, timeout=20)
        per_cpu = [int(v) - s for v, s in zip(usage.read_text().split(), start, strict=True)]
    finally:
        process.communicate(input="stop\n", timeout=30)
    inside = sum(per_cpu[int(cpu)] for cpu in cpus.split(","))
    assert inside >= 3e8 and sum(per_cpu) - inside <= 0.01 * inside, per_cpu


def test_the_daemonset_hook_refuses_cpus_outside_the_parent_cpuset(node: DaemonSetNode) -> None:
    name, cpus = node.allocate()
    other = "0" if cpus != "0" else "1"
    narrow = f"{node.host.cgroup_parent}/narrow"
    make_cpuset_parent(narrow, other)

    result = node.host.run([name], "echo started", cgroup_parent=narrow)

    assert result.returncode != 0 and "started" not in result.stdout
    assert f"kubenode cdi-hook: CPUs {cpus} are outside the parent cgroup's cpuset {other}" in result.stderr
