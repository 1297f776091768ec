"""`ContainerdProcess`: a real containerd with a private config, nothing on the host's default paths.

Flow: a temporary directory holds config.toml, root/, state/ and the gRPC socket -> `containerd --config`
runs as a child -> `start()` waits until the socket answers (`ctr version`) -> the busybox and sandbox
images are imported (harness/ociimage.py) -> tests and benchmarks use `endpoint` (unix://...).
`close()` stops every sandbox the CRI plugin runs (through crictl-like calls is not needed: containerd's
shims are killed with their process groups), stops containerd, unmounts what is left under root/, removes
the directory, and removes the empty `k8s.io` cgroups containerd made in the v1 hierarchies or at the top of
the v2 one (named after its CRI namespace, created on first use and never removed by containerd itself).

Two facts of these machines are in the config, not hidden (docs/runtime.md):
- `restrict_oom_score_adj = true`: a sandbox here cannot lower oom_score_adj, and runc fails otherwise;
- the overlayfs snapshotter (images are imported with it too): the native one is 25x slower.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

from agent.volumemanager.mountutil import unmount_all_under
from harness.ociimage import BUSYBOX_IMAGE, PAUSE_IMAGE, import_image

CGROUP_MOUNT = Path("/sys/fs/cgroup")
NAMESPACE_CGROUP = "k8s.io"  # containerd's CRI namespace, which it also uses as a cgroup name


def namespace_cgroups() -> set[Path]:
    """The `k8s.io` cgroups containerd makes (any version): one per v1 hierarchy; on a v2 host the one cgroup
    at the mount's top."""
    found = [*CGROUP_MOUNT.glob(f"*/{NAMESPACE_CGROUP}"), CGROUP_MOUNT / NAMESPACE_CGROUP]
    return {d for d in found if d.is_dir()}


CONFIG = """version = 2
root = "{root}"
state = "{state}"
oom_score = 0
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  disable_cgroup = false
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{root}/cni-bin"
    conf_dir = "{root}/cni-conf"
"""


class ContainerdProcess:
    def __init__(self, *, images: tuple[str, ...] = (BUSYBOX_IMAGE,)) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="kubenode-containerd-"))
        self.socket = str(self.dir / "containerd.sock")
        self.endpoint = f"unix://{self.socket}"
        self.images = images
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.dir / "containerd.log"
        self._namespace_cgroups_before = namespace_cgroups()

    def start(self, *, import_images: bool = True) -> ContainerdProcess:
        if shutil.which("containerd") is None or shutil.which("ctr") is None:
            raise RuntimeError("containerd is not installed: run `make containerd-deps` (as root)")
        config = self.dir / "config.toml"
        config.write_text(
            CONFIG.format(
                root=self.dir / "root", state=self.dir / "state", socket=self.socket, pause=PAUSE_IMAGE
            )
        )
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                ["containerd", "--config", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._wait_ready()
        if import_images:
            for name in (PAUSE_IMAGE, *self.images):
                import_image(self.socket, name)
        return self

    def _wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"containerd exited {self.process.returncode}: {self.log_tail()}")
            if os.path.exists(self.socket):
                done = subprocess.run(
                    ["ctr", "--address", self.socket, "version"], capture_output=True, check=False
                )
                if done.returncode == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"containerd did not answer within {timeout:.0f} s: {self.log_tail()}")

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop containerd only (its shims and containers keep running, as after a crash)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def _shims(self) -> list[psutil.Process]:
        """The shims of this containerd: their command line names our socket's directory."""
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            cmdline = proc.info.get("cmdline") or []
            if any(str(self.dir) in part for part in cmdline) and proc.pid != os.getpid():
                found.append(proc)
        return found

    def close(self) -> None:
        self.stop()
        for shim in self._shims():
            with contextlib.suppress(psutil.Error):
                for child in shim.children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        child.kill()
                shim.kill()
        psutil.wait_procs(self._shims(), timeout=5)
        unmount_all_under(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
        for made in namespace_cgroups() - self._namespace_cgroups_before:
            # Only when empty: rmdir refuses a cgroup with children, which another containerd may still use.
            with contextlib.suppress(OSError):
                made.rmdir()

    def __enter__(self) -> ContainerdProcess:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()
