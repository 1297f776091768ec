"""ExecSync: run a command in a container, wait for it, and return its exit code and output.

The kubelet asks the runtime's ExecSync for exec probes (and `kubectl exec` uses the same
placement). For a process "container" that means: the command runs as a container process
would (`processes.popen_in_cgroup`): in the pod cgroup in every hierarchy before it execs (so
it is limited and pinned like the pod), with the container's securityContext applied (user,
groups, capabilities, seccomp, no_new_privs: `securitycontext.process_security`), with the
container's environment and working directory (`envvars.container_env`), in a session of its own.
It carries no container identity stamp, so the runtime's reconcile never takes it for a copy of the
container. At `timeout` the whole session is SIGKILLed and the result says it timed out. Output
(stdout and stderr interleaved) is kept up to `max_output` bytes, as the kubelet keeps 10 KiB of a
probe's output; the rest is read and dropped, so a command that writes without end costs no memory.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from collections.abc import Mapping, Sequence

from agent.container.downwardapi import HostInfo, expand
from agent.container.execresult import ExecResult
from agent.kuberuntime.envvars import container_env
from agent.kuberuntime.execstream import private_mounts
from agent.kuberuntime.identity import IDENTITY_ENV
from agent.kuberuntime.processes import ProcessStartError, kill_session, popen_in_cgroup
from agent.kuberuntime.securitycontext import ProcessSecurity
from kubenode.model import Container, Pod

MAX_OUTPUT_BYTES = 10 * 1024  # the kubelet's maxReadLength for probe output


def exec_in_container(
    pod: Pod,
    container: Container,
    command: Sequence[str],
    procs_files: Sequence[str],
    host: HostInfo,
    *,
    timeout: float,
    device_env: Mapping[str, str] | None = None,
    security: ProcessSecurity | None = None,
    max_output: int = MAX_OUTPUT_BYTES,
    container_pid: int | None = None,
) -> ExecResult:
    """Run `command` in the container's place and wait at most `timeout` seconds.

    Raises ProcessStartError when the command cannot be started (missing binary, bad workingDir,
    the pod cgroup refused the process)."""
    if not command:
        raise ProcessStartError("the command is empty")
    env = {k: v for k, v in container_env(pod, container, host, device_env).items() if k != IDENTITY_ENV}
    argv = [expand(part, env) for part in command]
    # A container with volumes has a mount namespace of its own: the command joins it, as exec does.
    mounts_of = private_mounts(container_pid)
    if mounts_of is None and container.working_dir and not os.path.isdir(container.working_dir):
        raise ProcessStartError(f"workingDir {container.working_dir!r} does not exist")
    proc = popen_in_cgroup(
        argv,
        env,
        container.working_dir,
        procs_files,
        subprocess.PIPE,
        security=security,
        join_mounts_of=mounts_of,
    )
    output, timed_out = _read_bounded(proc, timeout, max_output)
    if timed_out:
        kill_session(proc.pid)
    code = proc.wait()
    return ExecResult(128 - code if code < 0 else code, output, timed_out)


def _read_bounded(proc: subprocess.Popen[bytes], timeout: float, keep: int) -> tuple[bytes, bool]:
    """The first `keep` bytes of the output until EOF (the rest is read and dropped, so a chatty command
    costs no memory); True as well when the deadline came first."""
    assert proc.stdout is not None
    kept = bytearray()
    deadline = time.monotonic() + timeout
    with proc.stdout, selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                return bytes(kept), True
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            kept += chunk[: max(0, keep - len(kept))]
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return bytes(kept), True  # closed its output but still runs
    return bytes(kept), False
