"""Container processes: started inside their cgroups before they run anything, or adopted after a restart.

`spawn` forks the process in its own session (so pods outlive the agent, which the
systemd unit's KillMode=process relies on) and, in the child between fork and exec,
writes the child's pid into the `cgroup.procs` files it is given (the container's own cgroup below the pod
cgroup in every hierarchy, and its devices cgroup on v1) using only os.open/os.write; the command is
therefore never executed outside its limits, cpuset or device rules.
Output goes to the container's log file (appended). A container with `stdin: true` reads a FIFO in the
state dir instead of /dev/null, which `kubectl attach` writes.

Every container process is stamped at spawn with an identity, the first entry of its
environment: `KUBENODE_CONTAINER=<pod uid>/<container>/<spawn id>`; with the container cgroup it sits
in, it is what the agent trusts instead of its own bookkeeping (agent/kuberuntime/identity.py).

An agent SIGKILLed in the middle of a spawn must leave no copy it cannot see: until the child has joined
its container cgroup (the point from which a restarted agent finds it there) it runs with the parent-death
signal set to SIGKILL, so it dies with the agent; it checks first that the agent is still its parent, and
clears the signal once it is in the cgroup (a container outlives the agent). The forking thread is the
one the signal watches, and it waits in Popen until the exec, so nothing else ends the child.

A spawned process is the agent's child, so its exit code is known. An adopted process
(found again after an agent restart, or found running although the record lost it) is
identified by pid plus its start time, which guards against pid reuse; its exit code
cannot be known, so it is reported as unknown.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import signal
import subprocess
import termios
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import psutil

if TYPE_CHECKING:
    from agent.kuberuntime.securitycontext import ProcessSecurity
from agent.kuberuntime.identity import IDENTITY_ENV, Identity
from agent.util.libc import LIBC, check
from agent.volumemanager.namespace import NamespacePlan, enter_container_namespace, report_and_raise

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


def in_pod_cgroup(
    procs_files: Sequence[str],
    security: ProcessSecurity | None = None,
    *,
    controlling_tty: bool = False,
    join_mounts_of: int | None = None,
    working_dir: str = "",
) -> Callable[[], None]:
    """The preexec_fn of a command exec'd in a container: into the pod cgroup; with `join_mounts_of`, into
    that container process's mount namespace (where its volumes are) and its `working_dir` there; with
    `controlling_tty`, its stdin (a pty slave, in its new session) becomes its controlling terminal; then
    down to the container's privileges (`security`), before it runs anything."""
    files = list(procs_files)

    def prepare() -> None:
        join_cgroup(files)
        if join_mounts_of is not None:
            fd = os.open(f"/proc/{join_mounts_of}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
            try:
                check(LIBC.setns(fd, _CLONE_NEWNS), "setns")
            finally:
                os.close(fd)
            os.chdir(working_dir or "/")
        if controlling_tty:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        if security is not None:
            security.apply_in_child()

    return prepare


_CLONE_NEWNS = 0x00020000


def check_working_dir(working_dir: str) -> None:
    if working_dir and not os.path.isdir(working_dir):
        raise ProcessStartError(f"workingDir {working_dir!r} does not exist")


def kill_session(pid: int) -> None:
    """SIGKILL a container process and the process group it leads (its descendants)."""
    signal_session(pid, signal.SIGKILL)


_PR_SET_PDEATHSIG = 1


def _prepare_child(
    procs_files: Sequence[str],
    security: ProcessSecurity | None,
    namespace: NamespacePlan | None,
    agent_pid: int | None = None,
) -> None:
    """In the child between fork and exec: the container's own mount namespace with its /dev and volumes
    (agent/volumemanager/namespace.py, which needs root), then into its cgroups (so nothing it runs is
    outside its limits and device rules), then down to the container's privileges (its securityContext; a
    read-only root is remounted inside the namespace the volumes are in, so the volumes stay writable).

    The namespace is built before the child joins the container's cgroups, as the agent's own work: under
    a small CPU quota (10m is 1 ms per 100 ms period) building /dev there would wait for the next period,
    and the device cgroup would refuse the mknod of its nodes. The cgroup files are opened first, while
    the host's /sys is certainly what the child sees. Until it is in them the child dies with the agent
    (`agent_pid`, see the module's docstring)."""
    if agent_pid is not None:
        check(LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
        if os.getppid() != agent_pid:
            os._exit(1)  # the agent died before the signal was armed: no one will look for this child
    fds = [os.open(path, os.O_WRONLY | os.O_CLOEXEC) for path in procs_files]
    try:
        if namespace is not None:
            try:
                enter_container_namespace(namespace)
            except BaseException as exc:
                report_and_raise(namespace, exc)
        pid = str(os.getpid()).encode()
        for fd in fds:
            os.write(fd, pid)
    finally:
        for fd in fds:
            os.close(fd)
    if agent_pid is not None:
        check(LIBC.prctl(_PR_SET_PDEATHSIG, 0, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if security is not None:
        security.apply_in_child()


def spawn(
    argv: Sequence[str],
    env: Mapping[str, str],
    working_dir: str,
    log_path: Path,
    procs_files: Sequence[str],
    identity: Identity | None = None,
    security: ProcessSecurity | None = None,
    namespace: NamespacePlan | None = None,
    *,
    stdin_path: Path | None = None,
) -> SpawnedProcess:
    """Start the container process; with a `namespace` plan it runs in its own mount namespace, where
    the workingDir is entered after the mounts (it may be a mountPath, or exist only there); with
    `stdin_path`, its stdin is that FIFO (made if missing), held open for reading and writing so the
    process never sees the end of input while no one attaches."""
    if namespace is None:
        check_working_dir(working_dir)
    log_path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
    files = list(procs_files)
    agent_pid = os.getpid()
    # The identity goes first (a cheap find for a process that keeps its environment as it got it); a
    # container's own variable of that name loses.
    stamped = {IDENTITY_ENV: str(identity)} if identity is not None else {}
    stamped.update((k, v) for k, v in env.items() if k != IDENTITY_ENV)
    # Logs are readable by the agent's group at most, whatever the umask (os.open's mode is masked).
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o640)
    os.fchmod(fd, 0o640)
    error_read, error_write = os.pipe2(os.O_CLOEXEC) if namespace is not None else (-1, -1)
    if namespace is not None:
        read_only_root = security is not None and security.read_only_root
        namespace = dataclasses.replace(
            namespace, working_dir=working_dir, error_fd=error_write, read_only_root=read_only_root
        )
    stdin: int = subprocess.DEVNULL
    if stdin_path is not None:
        stdin_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not stdin_path.is_fifo():
            stdin_path.unlink(missing_ok=True)
            os.mkfifo(stdin_path, 0o600)
        stdin = os.open(stdin_path, os.O_RDWR | os.O_CLOEXEC)
    with open(fd, "ab", buffering=0) as log, contextlib.ExitStack() as cleanup:
        if stdin_path is not None:
            cleanup.callback(os.close, stdin)
        try:
            popen = subprocess.Popen(
                list(argv),
                env=stamped,
                cwd=working_dir if working_dir and namespace is None else "/",
                stdin=stdin,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                # The pid must be in the pod cgroup before exec, and the process must have given up what its
                # securityContext does not grant before it runs anything; preexec_fn is the only hook there.
                preexec_fn=lambda: _prepare_child(files, security, namespace, agent_pid),
            )
        except subprocess.SubprocessError as exc:
            reason = _child_error(error_read, error_write)
            if reason:
                raise ProcessStartError(reason) from None  # it names the mountPath or the workingDir
            raise ProcessStartError(f"cannot place the process in its pod cgroup ({exc})") from None
        except OSError as exc:
            _child_error(error_read, error_write)
            raise ProcessStartError(f"cannot run {argv[0]!r}: {exc.strerror or exc}") from None
    _child_error(error_read, error_write)
    return SpawnedProcess(popen)


def _child_error(read_fd: int, write_fd: int) -> str:
    """What the child wrote before failing (empty if nothing, or if there is no pipe); closes the pipe."""
    if read_fd < 0:
        return ""
    os.close(write_fd)
    try:
        chunks = []
        while chunk := os.read(read_fd, 4096):
            chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")
    finally:
        os.close(read_fd)


def popen_in_cgroup(
    argv: Sequence[str],
    env: Mapping[str, str],
    working_dir: str,
    procs_files: Sequence[str],
    stdout: Any,
    *,
    security: ProcessSecurity | None = None,
    join_mounts_of: int | None = None,
) -> subprocess.Popen[bytes]:
    """A command run in a container's place (execsync.py): in a session of its own, placed in the pod cgroup,
    in the container process `join_mounts_of`'s mount namespace (its volumes) when given, and down to the
    container's privileges before it execs, as `spawn` places a container process; stderr goes with stdout.
    Raises ProcessStartError saying why it could not start."""
    prepare = in_pod_cgroup(procs_files, security, join_mounts_of=join_mounts_of, working_dir=working_dir)
    try:
        return subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd="/" if join_mounts_of is not None else working_dir or "/",
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            preexec_fn=prepare,
        )
    except subprocess.SubprocessError as exc:
        raise ProcessStartError(f"cannot place the process in its pod cgroup ({exc})") from None
    except OSError as exc:
        raise ProcessStartError(f"cannot run {argv[0]!r}: {exc.strerror or exc}") from None


def signal_session(pid: int, sig: signal.Signals) -> None:
    """Signal a container process and the process group it leads."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    signal_process(pid, sig)


def signal_process(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


class Launcher(Protocol):
    """How the runtime starts and signals container processes: the host's (`HOST_LAUNCHER`), or a
    hollow node's, which only pretends (agent/hollow/). `spawn` takes `spawn`'s arguments."""

    def spawn(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        working_dir: str,
        log_path: Path,
        procs_files: Sequence[str],
        identity: Identity | None = None,
        security: ProcessSecurity | None = None,
        namespace: NamespacePlan | None = None,
        *,
        stdin_path: Path | None = None,
    ) -> ContainerProcess: ...

    def signal(self, pid: int, sig: signal.Signals) -> None: ...


class HostLauncher:
    spawn = staticmethod(spawn)
    signal = staticmethod(signal_process)


HOST_LAUNCHER = HostLauncher()
