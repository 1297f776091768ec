"""SIGKILL the agent at an exact point of a container's spawn, restart it, and count the container's starts.

Run as `python -m harness.spawnkill ROOT MANIFESTS STATE POINT`; prints one JSON object. The points are
the windows of one start that a kill at a random moment (harness/killcycles.py) rarely hits:

- `in-prepare`: the child is forked but has not joined its container cgroup yet (it is building its
  mount namespace): no cgroup holds it. It holds that window open until the restarted agent has synced
  the pod (its record is written), then goes on.
- `in-namespace`: the same window, later: the child is building its mount namespace (its volumes, its
  /dev) when the agent dies; held open the same way.
- `before-exec`: the child has joined its container cgroup but not exec'd: it is in the cgroup, a session
  leader, but /proc/<pid>/environ is still the agent's (no identity stamp). It holds that window open
  the same way, then execs.
- `after-spawn`: the process runs, stamped, but the agent dies before the pod record is saved.

Agent A is a fork of this process with the kill injected (the child's preparation, or the launcher, wrapped
in agent A only); agent B is a plain fork on the same state. The container appends one line to its log at
every start, so `starts` counts every copy that ever ran, also one a later sync killed; `copies` is what
runs once agent B has settled. A correct agent gives starts == copies == 1.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import agent.kuberuntime.processes as processes
from agent.kuberuntime.processes import HOST_LAUNCHER, ContainerProcess, Launcher
from harness.killcycles import copies, fork_agent, kill, pod_text, wait_for
from harness.manifests import write_manifest

POINTS = ("in-prepare", "in-namespace", "before-exec", "after-spawn")
UID = "spawnkill-0"
SETTLE_S = 3.0  # how long agent B runs after the pod is up, for a later sync to show a second copy
DEADLINE_S = 15.0


class _KillAfterSpawn:
    """A launcher that SIGKILLs its own agent as soon as the process is spawned (before any record save)."""

    signal = staticmethod(HOST_LAUNCHER.signal)

    def spawn(self, *args: Any, **kwargs: Any) -> ContainerProcess:
        proc = HOST_LAUNCHER.spawn(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
        return proc


def _wait_orphaned(agent: int) -> None:
    """In the child: SIGKILL the agent that forked it and wait until it is gone (the child is reparented)."""
    os.kill(agent, signal.SIGKILL)
    while os.getppid() == agent:
        time.sleep(0.005)


def _hold_until_synced(record: Path) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not record.exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # the restarted agent's first sync of the pod has happened once it exists


def _inject_into_namespace(record: Path) -> None:
    """Wrap the namespace build in the child (processes.enter_container_namespace) in agent A."""
    real = vars(processes)["enter_container_namespace"]  # imported there, looked up at each call

    def enter(plan: Any) -> None:
        _wait_orphaned(os.getppid())
        _hold_until_synced(record)
        real(plan)

    vars(processes)["enter_container_namespace"] = enter


def _inject_into_prepare(point: str, record: Path) -> None:
    """Wrap the child's preparation (processes._prepare_child, looked up at each spawn) in agent A."""
    if point == "in-namespace":
        _inject_into_namespace(record)
        return
    real = processes._prepare_child

    def prepare(procs_files: Sequence[str], *args: Any, **kwargs: Any) -> None:
        agent = os.getppid()
        if point == "before-exec":
            real(procs_files, *args, **kwargs)
        _wait_orphaned(agent)
        _hold_until_synced(record)
        if point == "in-prepare":
            real(procs_files, *args, **kwargs)

    processes._prepare_child = prepare


def injection(point: str, state: Path) -> Launcher:
    """Agent A's fault (killcycles.run_agent's `inject`): the kill planted at `point`; the launcher to use."""
    if point == "after-spawn":
        return _KillAfterSpawn()
    _inject_into_prepare(point, state / "pods" / f"{UID}.json")
    return HOST_LAUNCHER


def starts(state: Path) -> int:
    """Lines the container wrote at its starts, over every log file of the pod."""
    found = 0
    for directory, _dirs, files in os.walk(state / "logs"):
        if UID not in directory:
            continue
        for name in files:
            found += Path(directory, name).read_text(errors="replace").count("kubenode-started\n")
    return found


def main(argv: Sequence[str]) -> int:
    root, manifests, state, point = argv[0], Path(argv[1]), Path(argv[2]), argv[3]
    if point not in POINTS:
        print(f"unknown kill point {point!r}; one of {', '.join(POINTS)}", file=sys.stderr)
        return 2
    write_manifest(manifests, "p.yaml", pod_text("spawnkill", UID, "echo kubenode-started; exec sleep 600"))
    agent = fork_agent(root, manifests, state, functools.partial(injection, point, state))
    # Agent A kills itself at the point; it must be dead (killed, not crashed) before agent B starts.
    _done, status = os.waitpid(agent, 0)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    agent = fork_agent(root, manifests, state)
    up: Callable[[], bool] = lambda: starts(state) >= 1 and copies(root).get(UID) == 1  # noqa: E731
    wait_for(up, DEADLINE_S)
    time.sleep(SETTLE_S)  # let later syncs (and a late exec) happen: a second copy would show by now
    result = {
        "point": point,
        "agent_a_killed": killed,
        "starts": starts(state),
        "copies": copies(root).get(UID, 0),
    }
    kill(agent)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
