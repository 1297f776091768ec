"""Real containers for the CDI tests: podman with runc, a busybox image from a local tar, no registry.

Podman 4.3 reads CDI specs only from /etc/cdi and /var/run/cdi. So that the host's /var/run/cdi is never
touched (nor created: the cpu backend turns CDI on when it exists), podman runs inside a private mount
namespace held open by a `sleep` process: there a tmpfs covers /run and our temporary CDI dir is bound at
/run/cdi. Podman's storage, run and tmp dirs are under the same temporary dir, and every container goes
under a cgroup parent of our own in each cgroup v1 hierarchy, removed at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path

IMAGE = "localhost/kn-cdi-busybox:latest"
BUSYBOX = "/bin/busybox"
CGROUP_ROOT = Path("/sys/fs/cgroup")
RUN_FLAGS = (
    "--rm",
    "--network=none",
    "--ulimit=nofile=1024:1024",
    "--ulimit=nproc=1024:1024",
)


class PodmanMissing(RuntimeError):
    pass


def find_runc() -> str:
    for candidate in ("/usr/sbin/runc", "/usr/bin/runc"):
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("runc")
    if found is None:
        raise PodmanMissing("runc is not installed: run `make podman-deps` as root")
    return found


def check_installed() -> None:
    """FAIL (never skip) the podman tests with what is missing and how to get it."""
    missing = [name for name in ("podman", "unshare", "nsenter") if shutil.which(name) is None]
    if not os.access(BUSYBOX, os.X_OK):
        missing.append(f"busybox-static ({BUSYBOX})")
    if missing:
        raise PodmanMissing(f"missing {', '.join(missing)}: run `make podman-deps` as root")
    find_runc()
    if os.geteuid() != 0:
        raise PodmanMissing("the podman CDI tests need root (cgroups, mount namespace)")


class Podman:
    """`binds` puts host directories at other paths in podman's namespace, over a tmpfs on their top
    directory (e.g. {"/opt/kubenode/cdi-hook": dir} hides the real /opt there): the paths a DaemonSet's
    hostPaths name, without touching the machine's own."""

    def __init__(self, binds: dict[str, Path] | None = None) -> None:
        check_installed()
        self.runc = find_runc()
        self.base = Path(tempfile.mkdtemp(prefix="kn-cdi-", dir="/tmp"))
        self.cdi_dir = self.base / "cdi"
        self.cdi_dir.mkdir()
        self.cgroup_parent = f"/{self.base.name}"
        self._holder = subprocess.Popen(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                "set -e; mount -t tmpfs -o mode=755 kn-cdi-run /run; mkdir -p /run/cdi /run/lock; "
                f"mount --bind {self.cdi_dir} /run/cdi; {_bind_script(binds or {})}"
                "echo ready; exec sleep infinity",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert self._holder.stdout is not None
            if self._holder.stdout.readline().strip() != "ready":
                raise RuntimeError("could not set up the mount namespace for podman")
            self._import_image()
        except BaseException:
            self.close()
            raise

    def _import_image(self) -> None:
        tar_path = self.base / "image.tar"
        with tarfile.open(tar_path, "w") as tar:
            tar.add(BUSYBOX, arcname="bin/busybox")
        self.podman("import", str(tar_path), IMAGE, check=True)

    def command(self, *args: str, runtime: str | None = None) -> list[str]:
        return [
            "nsenter",
            f"--target={self._holder.pid}",
            "--mount",
            "podman",
            f"--root={self.base / 'storage'}",
            f"--runroot={self.base / 'run'}",
            f"--tmpdir={self.base / 'tmp'}",
            "--storage-driver=vfs",
            f"--runtime={runtime or self.runc}",
            "--cgroup-manager=cgroupfs",
            "--events-backend=file",
            *args,
        ]

    def podman(
        self, *args: str, check: bool = False, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(self.command(*args), capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)} failed ({result.returncode}): {result.stderr}")
        return result

    def run_args(
        self,
        devices: Sequence[str],
        script: str,
        cgroup_parent: str | None = None,
        name: str | None = None,
        interactive: bool = False,
    ) -> list[str]:
        return [
            "run",
            *RUN_FLAGS,
            *(["--interactive"] if interactive else []),
            f"--cgroup-parent={cgroup_parent or self.cgroup_parent}",
            f"--name={name or 'kn-' + uuid.uuid4().hex[:8]}",
            *(f"--device={device}" for device in devices),
            IMAGE,
            BUSYBOX,
            "sh",
            "-c",
            script,
        ]

    def run(
        self,
        devices: Sequence[str],
        script: str,
        cgroup_parent: str | None = None,
        runtime: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        args = self.run_args(devices, script, cgroup_parent)
        return subprocess.run(
            self.command(*args, runtime=runtime), capture_output=True, text=True, timeout=60
        )

    def close(self) -> None:
        if self._holder.poll() is None:
            self.podman("rm", "--all", "--force", "--time=0")
            self._holder.send_signal(signal.SIGTERM)
            self._holder.wait(timeout=10)
        if self._holder.stdout is not None:
            self._holder.stdout.close()
        remove_cgroup_tree(self.cgroup_parent)
        shutil.rmtree(self.base, ignore_errors=True)


def _bind_script(binds: dict[str, Path]) -> str:
    tops = sorted({"/" + target.strip("/").split("/")[0] for target in binds})
    script = "".join(f"mount -t tmpfs -o mode=755 kn-cdi-top {top}; " for top in tops)
    for target, source in sorted(binds.items()):
        script += f"mkdir -p {target}; mount --bind {source} {target}; "
    return script


def cgroup_dirs(cgroup: str) -> list[Path]:
    """The cgroup's directory in every mounted v1 hierarchy (and the v2 one) that has it."""
    return [
        hierarchy / cgroup.lstrip("/")
        for hierarchy in sorted(CGROUP_ROOT.iterdir())
        if (hierarchy / cgroup.lstrip("/")).is_dir()
    ]


def remove_cgroup_tree(cgroup: str) -> None:
    for top in cgroup_dirs(cgroup):
        for directory, _, _ in sorted(os.walk(top), key=lambda entry: -len(entry[0])):
            with contextlib.suppress(OSError):  # still in use: left for the runtime to remove
                os.rmdir(directory)


def remove_cgroups_named(prefix: str) -> None:
    """Cgroups a runtime made under a name of ours anywhere in a hierarchy (e.g. below its own cgroup)."""
    for hierarchy in CGROUP_ROOT.iterdir():
        for directory, subdirs, _ in os.walk(hierarchy):
            for name in [d for d in subdirs if d.startswith(prefix)]:
                subdirs.remove(name)
                remove_cgroup_tree(os.path.join(directory, name).removeprefix(str(hierarchy)))


def make_cpuset_parent(cgroup: str, cpus: str) -> None:
    """A cgroup parent whose cpuset is narrower than the machine's (for the hook's refusal)."""
    directory = CGROUP_ROOT / "cpuset"
    for part in cgroup.strip("/").split("/"):
        directory = directory / part
        if not directory.is_dir():  # a new v1 cpuset starts empty: give it its parent's before a child
            directory.mkdir()
            for name in ("cpuset.mems", "cpuset.cpus"):
                (directory / name).write_text((directory.parent / name).read_text())
    (directory / "cpuset.cpus").write_text(cpus)
