"""A command run in a running container, with its streams: what `kubectl exec` reaches (the CRI's Exec).

    exec_spec(pod, container, command) -> the container's env (envvars.container_env), workingDir and
    securityContext (securitycontext.process_security), the pod cgroup's procs files -> ExecSession.start:
    the process forked in its own session, placed in the pod cgroup and down to the container's user and
    privileges before it runs anything (processes.in_pod_cgroup), so it is limited, pinned and confined
    like the container; a container with volumes runs in its own mount namespace, which the command joins
    (and its workingDir there) ->
    stdin/stdout/stderr as pipes, or with `tty` one pseudo-terminal that is its controlling terminal
    (resize sets its window size) -> `wait()` gives the exit code (128+signal for a signal) -> `kill()`
    ends the session and every process it started, when the client goes first.

The process carries no container identity (processes.IDENTITY_ENV), so the runtime never mistakes it for
a copy of the container; it dies with the pod, as kill_pod signals the whole pod cgroup. Limits: the
device plugins' env of the container is not repeated here.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import struct
import subprocess
import termios
from collections.abc import Sequence
from dataclasses import dataclass

from agent.container.downwardapi import HostInfo
from agent.container.security import SecurityPolicy
from agent.kuberuntime.envvars import container_env
from agent.kuberuntime.identity import IDENTITY_ENV
from agent.kuberuntime.processes import (
    ProcessStartError,
    check_working_dir,
    in_pod_cgroup,
    kill_session,
)
from agent.kuberuntime.securitycontext import ProcessSecurity, process_security
from kubenode.model import Pod

READ_CHUNK = 32 * 1024


@dataclass(frozen=True)
class ExecSpec:
    argv: tuple[str, ...]
    env: dict[str, str]
    working_dir: str
    procs_files: tuple[str, ...]
    security: ProcessSecurity | None = None
    mounts_of: int | None = None  # the container process whose mount namespace (its volumes) to join


def private_mounts(pid: int | None) -> int | None:
    """`pid` if that process runs in a mount namespace of its own (a container with volumes), else None."""
    if pid is None:
        return None
    try:
        return pid if os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt") else None
    except OSError:
        return None


def exec_spec(
    pod: Pod,
    container_name: str,
    command: Sequence[str],
    procs_files: Sequence[str],
    host: HostInfo,
    policy: SecurityPolicy | None = None,
    container_pid: int | None = None,
) -> ExecSpec:
    """What running `command` in the container means: its env, workingDir and, with the node's `policy`, its
    securityContext (user, groups, capabilities, seccomp), as the CRI's exec runs as the container does.
    Raises KeyError for an unknown container and envvars.ContainerConfigError when its env or security
    context cannot be resolved."""
    container = next((c for c in pod.all_containers if c.name == container_name), None)
    if container is None:
        raise KeyError(container_name)
    env = {k: v for k, v in container_env(pod, container, host).items() if k != IDENTITY_ENV}
    security = process_security(pod, container, policy) if policy is not None else None
    mounts = private_mounts(container_pid)
    return ExecSpec(tuple(command), env, container.working_dir, tuple(procs_files), security, mounts)


_TIOCSPTLCK = 0x40045431
_TIOCGPTPEER = 0x5441


def container_pty(pid: int) -> tuple[int, int]:
    """A pty of the container's own devpts (its /dev/pts, a new instance), as runc makes an exec's terminal
    inside the container: the command's `tty` is then a /dev/pts path that exists where it runs."""
    try:
        master = os.open(f"/proc/{pid}/root/dev/ptmx", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise ProcessStartError(f"cannot open the container's /dev/ptmx: {exc.strerror}") from None
    try:
        fcntl.ioctl(master, _TIOCSPTLCK, struct.pack("i", 0))  # unlockpt
        slave = fcntl.ioctl(master, _TIOCGPTPEER, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        os.close(master)
        raise ProcessStartError(f"cannot open a terminal in the container: {exc.strerror}") from None
    return master, slave


def _set_size(master: int, width: int, height: int) -> None:
    if 0 < width < 65536 and 0 < height < 65536:
        with contextlib.suppress(OSError):
            fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))


class ExecSession:
    """One running exec: read `stdout`/`stderr` (None when not asked for), write stdin, wait, kill."""

    def __init__(self, proc: asyncio.subprocess.Process, master: int | None) -> None:
        self._proc = proc
        self._master = master  # the pty's master side, with a tty
        self.pid = proc.pid

    @classmethod
    async def start(
        cls, spec: ExecSpec, *, stdin: bool, tty: bool, size: tuple[int, int] | None = None
    ) -> ExecSession:
        """Start the command; with `tty`, `size` (width, height) is the terminal's from its first moment."""
        if spec.mounts_of is None:
            check_working_dir(spec.working_dir)  # else it is checked inside the container's namespace
        master = slave = None
        if tty:
            master, slave = os.openpty() if spec.mounts_of is None else container_pty(spec.mounts_of)
            os.set_blocking(master, False)
            if size is not None:
                _set_size(master, *size)
        pipe = asyncio.subprocess.PIPE
        try:
            proc = await asyncio.create_subprocess_exec(
                *spec.argv,
                env=spec.env,
                cwd=(spec.working_dir or "/") if spec.mounts_of is None else "/",
                stdin=slave if tty else (pipe if stdin else subprocess.DEVNULL),
                stdout=slave if tty else pipe,
                stderr=slave if tty else pipe,
                start_new_session=True,
                close_fds=True,
                preexec_fn=in_pod_cgroup(
                    spec.procs_files,
                    spec.security,
                    controlling_tty=tty,
                    join_mounts_of=spec.mounts_of,
                    working_dir=spec.working_dir,
                ),
            )
        except subprocess.SubprocessError as exc:
            cls._close(master)
            raise ProcessStartError(f"cannot place the process in its pod cgroup ({exc})") from None
        except OSError as exc:
            cls._close(master)
            raise ProcessStartError(f"cannot run {spec.argv[0]!r}: {exc.strerror or exc}") from None
        finally:
            cls._close(slave)
        return cls(proc, master)

    @staticmethod
    def _close(fd: int | None) -> None:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    async def read_stdout(self) -> bytes:
        """The next chunk of output (a tty's, or stdout's); b"" at the end."""
        if self._master is not None:
            return await self._read_master()
        assert self._proc.stdout is not None
        return await self._proc.stdout.read(READ_CHUNK)

    async def read_stderr(self) -> bytes:
        if self._master is not None or self._proc.stderr is None:
            return b""
        return await self._proc.stderr.read(READ_CHUNK)

    async def _read_master(self) -> bytes:
        master = self._master
        assert master is not None
        loop = asyncio.get_running_loop()
        while True:
            try:
                return os.read(master, READ_CHUNK)
            except BlockingIOError:
                ready = loop.create_future()
                loop.add_reader(master, ready.set_result, None)
                try:
                    await ready
                finally:
                    loop.remove_reader(master)
            except OSError:
                return b""  # EIO: every holder of the slave side is gone

    async def write_stdin(self, data: bytes) -> None:
        if self._master is not None:
            view = memoryview(data)
            while view:
                try:
                    view = view[os.write(self._master, view) :]
                except BlockingIOError:
                    await asyncio.sleep(0.01)
                except OSError:
                    return
            return
        if self._proc.stdin is not None and not self._proc.stdin.is_closing():
            with contextlib.suppress(ConnectionError):
                self._proc.stdin.write(data)
                await self._proc.stdin.drain()

    def close_stdin(self) -> None:
        if self._master is not None:
            with contextlib.suppress(OSError):
                os.write(self._master, b"\x04")  # a terminal's end of input
        elif self._proc.stdin is not None:
            self._proc.stdin.close()

    def resize(self, width: int, height: int) -> None:
        if self._master is not None:
            _set_size(self._master, width, height)

    async def wait(self) -> int:
        code = await self._proc.wait()
        return 128 - code if code < 0 else code

    def kill(self) -> None:
        if self._proc.returncode is None:
            kill_session(self._proc.pid)
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)  # what it left running in its session

    def close(self) -> None:
        self._close(self._master)
        self._master = None
