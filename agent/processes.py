"""Container processes: started inside the pod cgroup before they run anything, or adopted after a restart.

`spawn` forks the process in its own session (so pods outlive the agent, which the
systemd unit's KillMode=process relies on) and, in the child between fork and exec,
writes the child's pid into the pod cgroup's `cgroup.procs` in every hierarchy using only
os.open/os.write; the command is therefore never executed outside its limits or cpuset.
Output goes to the container's log file (appended).

A spawned process is the agent's child, so its exit code is known. An adopted process
(found again after an agent restart) is identified by pid plus its start time, which
guards against pid reuse; its exit code cannot be known, so it is reported as unknown.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import psutil

# Exit code reported for an adopted process that has gone: the kubelet reports a container whose
# status is lost as ContainerStatusUnknown with 137.
UNKNOWN_EXIT_CODE = 137


class ProcessStartError(Exception):
    """The process could not be started (missing binary, bad workingDir, cgroup write refused)."""


class ContainerProcess(Protocol):
    pid: int
    create_time: float

    def poll(self) -> int | None:
        """None while running, else the exit code (128+signal for a signal, as container runtimes do)."""


def process_create_time(pid: int) -> float | None:
    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


class SpawnedProcess:
    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.create_time = process_create_time(popen.pid) or 0.0

    def poll(self) -> int | None:
        code = self._popen.poll()
        if code is None:
            return None
        return 128 - code if code < 0 else code


class AdoptedProcess:
    def __init__(self, pid: int, create_time: float) -> None:
        self.pid = pid
        self.create_time = create_time
        self._exit: int | None = None

    def poll(self) -> int | None:
        if self._exit is None and not is_same_process_alive(self.pid, self.create_time):
            self._exit = UNKNOWN_EXIT_CODE
        return self._exit


def is_same_process_alive(pid: int, create_time: float) -> bool:
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - create_time) > 0.05:
            return False  # the pid was reused
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False


def join_cgroup(procs_files: Sequence[str]) -> None:
    """Runs in the child between fork and exec: only async-signal-safe-ish os calls."""
    pid = str(os.getpid()).encode()
    for path in procs_files:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, pid)
        finally:
            os.close(fd)


def spawn(
    argv: Sequence[str],
    env: Mapping[str, str],
    working_dir: str,
    log_path: Path,
    procs_files: Sequence[str],
) -> SpawnedProcess:
    if working_dir and not os.path.isdir(working_dir):
        raise ProcessStartError(f"workingDir {working_dir!r} does not exist")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    files = list(procs_files)
    with open(log_path, "ab", buffering=0) as log:
        try:
            popen = subprocess.Popen(
                list(argv),
                env=dict(env),
                cwd=working_dir or "/",
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                # The pid must be in the pod cgroup before exec; preexec_fn is the only hook there.
                preexec_fn=lambda: join_cgroup(files),
            )
        except subprocess.SubprocessError as exc:
            raise ProcessStartError(f"cannot place the process in its pod cgroup ({exc})") from None
        except OSError as exc:
            raise ProcessStartError(f"cannot run {argv[0]!r}: {exc.strerror or exc}") from None
    return SpawnedProcess(popen)


def signal_process(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
