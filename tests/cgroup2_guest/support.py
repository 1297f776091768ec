"""Helpers for the tests that run inside the cgroup v2 guest (see tests/cgroup2_guest/conftest.py).

Python under qemu's TCG emulation is slow to start (importing the agent takes ~30-40 s over the
guest's 9p root), so processes that run kubenode code are forked from the already-warm test
process and call the same `cli.main.main` the console script calls; pods and hogs are plain
`sh` or `python -S` children placed in their cgroup before they run anything.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent.kuberuntime.processes import join_cgroup
from tests.agent.support import wait_until as agent_wait_until

MOUNT = Path("/sys/fs/cgroup")
GUEST_ENV = "KUBENODE_CGROUP2_GUEST_OUT"  # the host-visible dir the guest writes its transcript to
REPO = Path(__file__).resolve().parents[2]


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """agent tests' wait_until with a slower poll: every poll costs the emulated guest CPU."""
    return agent_wait_until(predicate, timeout, what, poll=0.05)


def cgroup_dir(cgroup: str) -> Path:
    return MOUNT / cgroup.strip("/")


def read(cgroup: str, file: str) -> str:
    return (cgroup_dir(cgroup) / file).read_text().strip()


def flat_keyed(cgroup: str, file: str) -> dict[str, int]:
    """A flat-keyed file such as cpu.stat or memory.events as a dict."""
    pairs = (line.split() for line in read(cgroup, file).splitlines())
    return {key: int(value) for key, value in pairs}


def procs(cgroup: str) -> set[int]:
    return {int(pid) for pid in read(cgroup, "cgroup.procs").split()}


def spawn_in(cgroup: str, argv: Sequence[str]) -> subprocess.Popen[bytes]:
    """A child placed in the cgroup before exec, as the agent's runtime places containers."""
    files = [str(cgroup_dir(cgroup) / "cgroup.procs")]
    return subprocess.Popen(list(argv), preexec_fn=lambda: join_cgroup(files))


def python_code(code: str) -> list[str]:
    # -S: no site import, so the child starts in a second or two under emulation, not tens.
    return [sys.executable, "-S", "-c", code]


def alive(pid: int) -> bool:
    """Running and not a zombie (an orphaned pod's zombie lingers until the guest's init reaps it)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def fork_cli(argv: Sequence[str], log: Path, cgroup: str | None = None) -> int:
    """Run `kubenode <argv>` in a forked child of this (warm) process; returns its pid.

    With `cgroup`, the child first moves itself there, as systemd starts a unit's main process
    in the unit's cgroup.
    """
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        if cgroup is not None:
            (cgroup_dir(cgroup) / "cgroup.procs").write_text(str(os.getpid()))
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM):
            signal.signal(sig, signal.SIG_DFL)
        from cli.main import main

        code = main(list(argv))
    except BaseException:  # the child must never return into pytest
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def stop_child(pid: int, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
    """Signal a forked child and reap it; SIGKILL if it outlives `timeout`. Returns its wait status."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    return os.waitpid(pid, 0)[1]


def http_json(listen: str, path: str) -> Any:
    with urllib.request.urlopen(f"http://{listen}{path}", timeout=10) as response:
        return json.loads(response.read())


def healthy(listen: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{listen}/healthz", timeout=2) as response:
            return bool(response.read() == b"ok")
    except OSError:
        return False
