"""A Debian machine booted with systemd-nspawn, with kubenode installed as `make install` installs it.

The rootfs tar (minbase + systemd, dbus, python3, python3-venv) is made once by mmdebstrap and cached under
KUBENODE_CACHE (tools/image.py, keyed on its packages); each machine is a fresh extraction into a temporary
directory. kubenode goes into /opt/kubenode from wheels built on the host (the machine's pip sees no index),
linked as /usr/local/bin/kubenode, with the units from systemd/ enabled as shipped. Booted as
environment.md found to work here: `systemd-nspawn --register=no --keep-unit -b --console=pipe`, with a
private network (the agent's status port is then its own); `nsenter` into its PID 1 runs commands there.

On a cgroup v1 host (these machines) nspawn mounts every controller hierarchy read-only in the machine
and its systemd delegates none of them (it runs only name=systemd and the empty unified hierarchy), so no
unit could make a cgroup there, hardened or not. With `cgroup_units`, a cgroup of the test's own in each
controller the agent uses is bound into the machine at /kn-host-cgroup/<controller>, and a drop-in binds
it over /sys/fs/cgroup/<controller> for those units only (BindPaths=): the stand-in for what Delegate=
gives on a v2 host. Every directive of the shipped unit still applies. The cgroups are removed at close.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.cdi.podman import CGROUP_ROOT, remove_cgroup_tree
from tests.deviceplugin.support import wait_until
from tools.image import build_wheels, rootfs_tar

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("systemd", "systemd-sysv", "dbus", "python3", "python3-venv")
UNITS = ("kubenode-agent.service", "kubenode-deviceplugin.service")
CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory", "pids")


class Machine:
    def __init__(self, files: Mapping[str, str], cgroup_units: Sequence[str] = ()) -> None:
        """`files`: paths inside the machine and their text (configs, manifests), written before boot;
        `cgroup_units`: units that get writable controller hierarchies (see above)."""
        self.base = Path(tempfile.mkdtemp(prefix="kn-nspawn-", dir="/var/tmp"))
        self.root = self.base / "root"
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.base / "console.log"
        self.cgroup = f"/{self.base.name}" if cgroup_units else None
        try:
            files = {**files, **self._cgroup_dropins(cgroup_units)}
            self._prepare(files)
        except BaseException:
            self.close()
            raise

    def _prepare(self, files: Mapping[str, str]) -> None:
        self.root.mkdir()
        with tarfile.open(rootfs_tar(PACKAGES)) as tar:
            tar.extractall(self.root, filter="fully_trusted")
        build_wheels(self.base)
        shutil.copytree(self.base / "wheels", self.root / "opt/kubenode-wheels")
        self.run_once(
            "python3 -m venv /opt/kubenode && /opt/kubenode/bin/pip install --quiet --no-index "
            "--find-links /opt/kubenode-wheels kubenode "
            "&& ln -sfn /opt/kubenode/bin/kubenode /usr/local/bin/kubenode && rm -rf /opt/kubenode-wheels"
        )
        units = self.root / "etc/systemd/system"
        wants = units / "multi-user.target.wants"
        wants.mkdir(parents=True, exist_ok=True)
        for unit in UNITS:
            shutil.copy(ROOT / "systemd" / unit, units / unit)
            (wants / unit).symlink_to(f"/etc/systemd/system/{unit}")
        for path, text in files.items():
            target = self.root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)

    def _cgroup_dropins(self, units: Sequence[str]) -> dict[str, str]:
        if self.cgroup is None:
            return {}
        for controller in CONTROLLERS:
            directory = CGROUP_ROOT / controller / self.cgroup.lstrip("/")
            directory.mkdir()
            if controller == "cpuset":  # a new v1 cpuset is empty: give it the machine's before any child
                for name in ("cpuset.cpus", "cpuset.mems"):
                    (directory / name).write_text((directory.parent / name).read_text())
        dropin = "[Service]\n" + "".join(
            f"BindPaths=/kn-host-cgroup/{c}:/sys/fs/cgroup/{c}\n" for c in CONTROLLERS
        )
        return {f"/etc/systemd/system/{unit}.d/kn-v1-host.conf": dropin for unit in units}

    def host_cgroup(self, controller: str) -> Path:
        """The host directory bound as the units' /sys/fs/cgroup/<controller>."""
        assert self.cgroup is not None
        return CGROUP_ROOT / controller / self.cgroup.lstrip("/")

    def run_once(self, script: str) -> None:
        """A command in the rootfs before boot (no systemd), e.g. the install."""
        result = subprocess.run(
            [
                "systemd-nspawn",
                "--register=no",
                "--keep-unit",
                "--quiet",
                "-D",
                str(self.root),
                "sh",
                "-c",
                script,
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if result.returncode != 0:
            raise AssertionError(f"in the rootfs: {script}: {result.stdout}{result.stderr}")

    def boot(self) -> None:
        with open(self.log, "wb") as console:
            self.process = subprocess.Popen(
                [
                    "systemd-nspawn",
                    "--register=no",
                    "--keep-unit",
                    "--private-network",
                    *(
                        f"--bind={self.host_cgroup(c)}:/kn-host-cgroup/{c}"
                        for c in (CONTROLLERS if self.cgroup else ())
                    ),
                    "-D",
                    str(self.root),
                    "-b",
                    "--console=pipe",
                ],
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
            )

    def pid1(self) -> int | None:
        """The machine's init, the child of systemd-nspawn."""
        if self.process is None:
            return None
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{self.process.pid}/task").iterdir():
                children = (task / "children").read_text().split()
                if children:
                    return int(children[0])
        return None

    def exec(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        pid = self.pid1()
        assert pid is not None, "the machine is not running: " + self.console()
        return subprocess.run(
            ["nsenter", "-t", str(pid), "-a", *argv], capture_output=True, text=True, timeout=timeout
        )

    def console(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            pid = self.pid1()
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGRTMIN + 4)  # systemd: power off
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                if pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)  # ends its whole pid namespace
                self.process.wait(timeout=30)
        if self.cgroup is not None:
            for procs in self.host_cgroup("pids").rglob("cgroup.procs"):
                for left in procs.read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(left), signal.SIGKILL)
            wait_until(
                lambda: (
                    not any(p.read_text().split() for p in self.host_cgroup("pids").rglob("cgroup.procs"))
                ),
                timeout=10,
            )
            remove_cgroup_tree(self.cgroup)
        shutil.rmtree(self.base, ignore_errors=True)


def wait_for(check: Sequence[str], machine: Machine, want: str, timeout: float) -> str:
    """Runs `check` in the machine until its stdout contains `want`; returns the last output."""
    output = [""]

    def done() -> bool:
        if machine.pid1() is None:
            return False
        result = machine.exec(*check)
        output[0] = result.stdout + result.stderr
        return want in result.stdout

    wait_until(done, timeout=timeout, interval=0.5)
    return output[0]
