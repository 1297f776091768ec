"""`Containerd2`: the real containerd 2.4 (.k8s/bin) with a private config, beside harness/containerd.py's
Debian 1.6 and never mixed with it.

Flow: a temporary directory holds config.toml (version 3), root/, state/, the gRPC socket, a CDI spec dir
(`cdi_dir`, the only one the CRI plugin reads) and a CNI conf dir -> `containerd --config` runs as a child
whose PATH starts with .k8s/bin -> `start()` waits until `ctr version` answers -> the sandbox (pause) and
busybox images are built here and imported (harness/k8s/images.py) -> the kubelet (harness/k8s/kubelet.py)
or `crictl()` use `endpoint`. `close()` removes every pod (`crictl rmp --force --all`, so the shims exit by
themselves), stops containerd, kills any shim left and its containers, removes their sockets in
/run/containerd/s (a fixed path in containerd 2, whatever the config) and that directory if it made it,
unmounts what is left under its directory and removes it, and removes the empty `k8s.io` cgroups it made.

What the config pins, and why:
- the runc runtime's shim is `runtime_path` = .k8s/bin/containerd-shim-runc-v2 (an absolute path: containerd 2
  looks for `containerd-shim-runc-v2` on PATH first, and Debian's 1.6 shim may be there) and its runc is
  `BinaryName` = .k8s/bin/runc 1.5 with its state in `runc_root` (not the shared /run/containerd/runc);
  `shims()` lists the shims that run and `runc_list()` the containers runc 1.5 holds, so a test can check;
- `SystemdCgroup = false` (PID 1 is not systemd; the kubelet's cgroupDriver is cgroupfs);
- `restrict_oom_score_adj = true`: the kernel here refuses a negative oom_score_adj and the pause container's
  -998 would fail ("can't get final child's PID");
- `cdi_spec_dirs = [cdi_dir]`: CDI is always on in containerd 2.x (`enable_cdi` is a v2 key it drops when
  migrating), and the dirs are the test's own, never /etc/cdi or /var/run/cdi;
- the pinned sandbox image is the busybox image built here (`registry.k8s.io/pause:kubenode`);
- CNI: a `loopback`-only network list, so the runtime reports NetworkReady (the kubelet's Node is Ready only
  then); pods use `hostNetwork: true` and never run a CNI plugin (nothing here routes a pod network).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from agent.volumemanager.mountutil import unmount_all_under
from harness.containerd import CGROUP_MOUNT, NAMESPACE_CGROUP, namespace_cgroups
from harness.k8s.binaries import bin_dir, binary
from harness.k8s.images import BUSYBOX_IMAGE, PAUSE_IMAGE, import_image

SHIM_SOCKET_DIR = Path(
    "/run/containerd/s"
)  # containerd 2's shims put their sockets here, whatever the config

CONFIG = """version = 3
root = "{root}"
state = "{state}"
oom_score = 0
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.erofs",
  "io.containerd.differ.v1.erofs", "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing", "io.containerd.nri.v1.nri"]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{pause}"

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  enable_selinux = false
  cdi_spec_dirs = ["{cdi}"]
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      runtime_path = "{shim}"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        Root = "{runc_root}"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{cni_bin}"]
    conf_dir = "{cni_conf}"

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""

LOOPBACK_NETWORK = {"cniVersion": "1.0.0", "name": "kubenode-loopback", "plugins": [{"type": "loopback"}]}


class Containerd2:
    def __init__(self, *, images: tuple[str, ...] = (BUSYBOX_IMAGE,), cdi_dir: Path | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="kubenode-containerd2-"))
        self.socket = str(self.dir / "containerd.sock")
        self.endpoint = f"unix://{self.socket}"
        self.cdi_dir = cdi_dir or self.dir / "cdi"
        self.images = images
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.dir / "containerd.log"
        self.shim_path = binary("containerd-shim-runc-v2")
        self.runc_path = binary("runc")
        self.runc_root = self.dir / "runc"  # runc's state (default /run/containerd/runc/<ns>, shared)
        self._cgroups_before = namespace_cgroups() | self._container_cgroups()
        self._run_dirs_before = {d for d in (SHIM_SOCKET_DIR, SHIM_SOCKET_DIR.parent) if d.exists()}

    def start(self) -> Containerd2:
        self.cdi_dir.mkdir(parents=True, exist_ok=True)
        cni_conf = self.dir / "cni-conf"
        cni_conf.mkdir()
        (cni_conf / "10-loopback.conflist").write_text(json.dumps(LOOPBACK_NETWORK))
        cni_bin = Path("/usr/lib/cni") if Path("/usr/lib/cni/loopback").exists() else self.dir / "cni-bin"
        cni_bin.mkdir(exist_ok=True)
        config = self.dir / "config.toml"
        config.write_text(
            CONFIG.format(
                root=self.dir / "root",
                state=self.dir / "state",
                socket=self.socket,
                pause=PAUSE_IMAGE,
                cdi=self.cdi_dir,
                shim=self.shim_path,
                runc=self.runc_path,
                runc_root=self.runc_root,
                cni_bin=cni_bin,
                cni_conf=cni_conf,
            )
        )
        env = dict(os.environ)
        env["PATH"] = f"{bin_dir().resolve()}:{self.shim_path.parent}:{env.get('PATH', '/usr/bin:/bin')}"
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [str(binary("containerd")), "--config", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
            )
        self._wait_ready()
        for name in (PAUSE_IMAGE, *self.images):
            import_image(self.socket, name)
        return self

    def _wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"containerd 2 exited {self.process.returncode}: {self.log_tail()}")
            if os.path.exists(self.socket):
                done = subprocess.run(
                    [str(binary("ctr")), "--address", self.socket, "version"],
                    capture_output=True,
                    check=False,
                )
                if done.returncode == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"containerd 2 did not answer within {timeout:.0f} s: {self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def crictl(self, *args: str, timeout: float = 60) -> str:
        """Run crictl 1.37 against this containerd; its stdout (an error names the command and stderr)."""
        done = subprocess.run(
            [
                str(binary("crictl")),
                "--runtime-endpoint",
                self.endpoint,
                "--image-endpoint",
                self.endpoint,
                *args,
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"crictl {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def crictl_json(self, command: str, *args: str) -> Any:
        return json.loads(self.crictl(command, "-o", "json", *args))

    def container_pid(self, container_id: str) -> int:
        return int(self.crictl_json("inspect", container_id)["info"]["pid"])

    def runc_list(self) -> list[str]:
        """The IDs of the containers .k8s/bin/runc holds in this containerd's runc root."""
        done = subprocess.run(
            [str(self.runc_path), "--root", str(self.runc_root / "k8s.io"), "list", "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        return [str(c["id"]) for c in json.loads(done.stdout or "null") or []]

    def shims(self) -> list[psutil.Process]:
        """The shims of this containerd: their command line names its socket's directory."""
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            cmdline = proc.info.get("cmdline") or []
            ours = any(str(self.dir) in part for part in cmdline[1:])
            if ours and proc.pid != os.getpid() and (self.process is None or proc.pid != self.process.pid):
                found.append(proc)
        return found

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def close(self) -> None:
        # Pods first, while containerd runs: their shims then exit by themselves and remove what they made
        # outside our directory (the shim sockets in /run/containerd/s, a fixed path in containerd 2).
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired, OSError):
                self.crictl("rmp", "--force", "--all", timeout=60)
        self.stop()
        keep = os.environ.get("KUBENODE_INTEROP_LOGS")
        if keep:
            with contextlib.suppress(OSError):
                Path(keep).mkdir(parents=True, exist_ok=True)
                shutil.copy(self.log_path, Path(keep) / f"{self.dir.name}.log")
        shims = self.shims()
        for shim in shims:
            with contextlib.suppress(psutil.Error):
                for child in shim.children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        child.kill()
                shim.kill()
        psutil.wait_procs(shims, timeout=5)
        self._remove_shim_sockets()
        unmount_all_under(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
        # Containers crictl ran without a cgroup parent live in k8s.io/<id> (the kubelet's are under its
        # own cgroup root, which harness/k8s/kubelet.py sweeps); only the ones made meanwhile go, when empty.
        for made in sorted(self._container_cgroups() - self._cgroups_before, key=lambda p: -len(str(p))):
            with contextlib.suppress(OSError):
                made.rmdir()
        for made in namespace_cgroups() - self._cgroups_before:
            with contextlib.suppress(OSError):
                made.rmdir()

    def _remove_shim_sockets(self) -> None:
        """A killed shim leaves its socket /run/containerd/s/<sha256(<our socket>/k8s.io/<id>)>: remove those
        of every task this containerd had (the ids are its task state dirs)."""
        tasks = self.dir / "state" / "io.containerd.runtime.v2.task" / NAMESPACE_CGROUP
        for task in tasks.iterdir() if tasks.is_dir() else ():
            for suffix in ("", "/debug"):
                digest = hashlib.sha256(f"{self.socket}/{NAMESPACE_CGROUP}/{task.name}{suffix}".encode())
                (SHIM_SOCKET_DIR / digest.hexdigest()).unlink(missing_ok=True)
        if self._other_containerd_running():
            return  # its shims may be about to put a socket there
        for made in (SHIM_SOCKET_DIR, SHIM_SOCKET_DIR.parent):  # made by our shims: removed once empty
            if made not in self._run_dirs_before:
                with contextlib.suppress(OSError):
                    made.rmdir()

    def _other_containerd_running(self) -> bool:
        names = ("containerd", "containerd-shim-runc-v2", "containerd-shim")
        ours = self.process.pid if self.process is not None else None
        return any(
            p.info.get("name") in names and p.info.get("pid") != ours
            for p in psutil.process_iter(["name", "pid"])
        )

    @staticmethod
    def _container_cgroups() -> set[Path]:
        return {d for d in CGROUP_MOUNT.glob(f"*/{NAMESPACE_CGROUP}/*") if d.is_dir()}

    def __enter__(self) -> Containerd2:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()
