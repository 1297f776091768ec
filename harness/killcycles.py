"""SIGKILL the agent while pods start, many times over, and count the copies of each container.

Run as `python -m harness.killcycles ROOT MANIFESTS STATE CYCLES PODS`; prints one JSON
object. The parent imports the agent once and never starts a thread, so every agent is a cheap
fork of it. Each cycle writes a new batch of pods (the previous batch's manifests are removed,
so the next agent also cleans up orphans while it starts the batch), forks agent A and SIGKILLs
it at a point that moves from cycle to cycle (at once, then once 10%, 25%, 50%, 75% and all of
the batch's containers have appeared), then forks agent B on the same state and waits, with a
deadline, until every pod of the batch runs exactly one container process. The copies each
pod's cgroup holds at that moment are the result; a healthy agent never leaves more than one. The container
is a shell that execs its program, as most pods' are: the program's environment is the one the shell
rebuilt, in the shell's order, which a restarted agent must still recognise. The exact windows of one spawn
that a kill from outside rarely hits (before the child joins its cgroup, before it execs, before the record
is saved) are injected one by one by harness/spawnkill.py.

Every pod has volumes (a memory-backed emptyDir, a tmpfs on the host, and a downwardAPI volume, mounted
in the container's own namespace at a path the host lacks), so a kill also lands between a tmpfs mount
and a container start. After each cycle agent B must also have left exactly the batch's volumes: one
pod directory and one tmpfs per pod of the batch, none of the previous batch (which it removed as
orphans); `stale_volume_dirs` and `stale_mounts` count what was left over, summed over the cycles.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from agent.cm.cgroups import make_pod_cgroups
from agent.cm.cgroups.files import tree_pids
from agent.composition import compose_node
from agent.config.sources import ManifestSource
from agent.kuberuntime.processes import HOST_LAUNCHER, Launcher
from agent.volumemanager.mountutil import mounts_under
from harness.cgroupfs import process_tree
from harness.manifests import fast_agent_config, write_manifest

# The share of the batch's containers seen running before the kill: none (killed at once) ... all.
KILL_POINTS = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0)
POINT_DEADLINE_S = 3.0
# Only reached when copies never converge to one. Longer than the crash-loop back-off (10 s): a container
# whose start the kill cut short dies with its agent (agent/kuberuntime/processes.py) and the next agent
# restarts it after that back-off, as a kubelet restarts a container that failed to start.
CONVERGE_DEADLINE_S = 15.0

Injection = Callable[[], Launcher]


def run_agent(root: str, manifests: Path, state: Path, inject: Injection | None = None) -> None:
    """The child: an agent on the shared state, until it is killed; `inject` (run first, in the child)
    plants a fault and gives the launcher to use (harness/spawnkill.py)."""
    logging.basicConfig(level=logging.ERROR)
    launcher = inject() if inject is not None else HOST_LAUNCHER
    config = fast_agent_config(root, manifests, state, housekeeping_interval=0.2)
    agent = compose_node(
        config,
        make_pod_cgroups(root),
        [ManifestSource(manifests, "testnode", rescan_interval=1.0)],
        launcher=launcher,
    )
    agent.start()
    while True:
        time.sleep(3600)


def fork_agent(root: str, manifests: Path, state: Path, inject: Injection | None = None) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            run_agent(root, manifests, state, inject)
        finally:
            os._exit(3)
    return pid


def copies(root: str) -> dict[str, int]:
    """Pod UID -> container processes (session leaders) in its cgroup and its containers' cgroups below it;
    descendants are not counted."""
    top = process_tree(root)
    found: dict[str, int] = {}
    for current, dirs, _files in os.walk(top):
        name = os.path.basename(current)
        if not name.startswith("pod"):
            continue
        dirs.clear()
        count = 0
        pids = tree_pids(current)
        if not pids and not os.path.isdir(current):
            continue  # removed meanwhile
        for pid in pids:
            with contextlib.suppress(OSError):  # exited meanwhile
                count += os.getsid(pid) == pid
        found[name[len("pod") :]] = count
    return found


def started_at_least(root: str, uids: list[str], wanted: int) -> bool:
    now = copies(root)
    return sum(now.get(u, 0) > 0 for u in uids) >= wanted


def converged(root: str, uids: list[str]) -> bool:
    now = copies(root)
    return all(now.get(u) == 1 for u in uids)


def volume_leftovers(state: Path, uids: list[str]) -> tuple[int, int]:
    """(pod volume directories of other pods, tmpfs mounts beyond one per pod of the batch) under `state`."""
    pods_dir = state / "pods"
    dirs = {e.name for e in os.scandir(pods_dir) if e.is_dir()} if pods_dir.is_dir() else set()
    mounts = mounts_under(state)
    return len(dirs - set(uids)), max(0, len(mounts) - len(uids))


def volumes_settled(state: Path, uids: list[str]) -> bool:
    return volume_leftovers(state, uids) == (0, 0)


def write_batch(manifests: Path, cycle: int, pods: int) -> list[str]:
    for old in manifests.iterdir():
        old.unlink()
    uids = []
    for p in range(pods):
        uid = f"hostile-{cycle}-{p}"
        write_manifest(manifests, f"c{cycle}-p{p}.yaml", pod_text(f"c{cycle}-p{p}", uid, "exec sleep 600"))
        uids.append(uid)
    return uids


def pod_text(name: str, uid: str, script: str) -> str:
    """A pod whose container runs `script` in a shell, with a memory emptyDir and a downwardAPI volume."""
    return f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}, uid: {uid}}}
        spec:
          terminationGracePeriodSeconds: 1
          containers:
          - name: main
            command: [sh, -c, {json.dumps(script)}]
            volumeMounts:
            - {{name: scratch, mountPath: /kn-hostile-volumes/scratch}}
            - {{name: info, mountPath: /kn-hostile-volumes/info}}
          volumes:
          - {{name: scratch, emptyDir: {{medium: Memory, sizeLimit: 1Mi}}}}
          - name: info
            downwardAPI: {{items: [{{path: name, fieldRef: {{fieldPath: metadata.name}}}}]}}
        """


def wait_for(predicate: Callable[[], bool], deadline_s: float, *, poll_s: float = 0.02) -> bool:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll_s)
    return False


def kill(pid: int) -> bool:
    """SIGKILL the agent; returns whether it was still running (it must never have died on its own)."""
    done, _status = os.waitpid(pid, os.WNOHANG)
    alive = done == 0
    if alive:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return alive


def main() -> int:
    root, manifests, state = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    cycles, pods = int(sys.argv[4]), int(sys.argv[5])
    result_copies: dict[str, int] = {}
    stale_dirs = stale_mounts = 0
    crashed = 0
    begun = time.monotonic()
    for cycle in range(cycles):
        uids = write_batch(manifests, cycle, pods)
        point = KILL_POINTS[cycle % len(KILL_POINTS)]
        wanted = math.ceil(point * pods)
        agent = fork_agent(root, manifests, state)
        if wanted:
            wait_for(functools.partial(started_at_least, root, uids, wanted), POINT_DEADLINE_S)
        crashed += not kill(agent)
        agent = fork_agent(root, manifests, state)
        wait_for(functools.partial(converged, root, uids), CONVERGE_DEADLINE_S)
        now = copies(root)
        for uid in uids:
            result_copies[uid] = now.get(uid, 0)
        wait_for(functools.partial(volumes_settled, state, uids), CONVERGE_DEADLINE_S)
        dirs, mounts = volume_leftovers(state, uids)
        stale_dirs, stale_mounts = stale_dirs + dirs, stale_mounts + mounts
        crashed += not kill(agent)
    result = {
        "cycles": cycles,
        "pods": pods,
        "max_copies": max(result_copies.values()),
        "min_copies": min(result_copies.values()),
        "pods_with_extra_copies": sum(n > 1 for n in result_copies.values()),
        "agents_that_died_on_their_own": crashed,
        "stale_volume_dirs": stale_dirs,
        "stale_mounts": stale_mounts,
        "seconds": round(time.monotonic() - begun, 1),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
