"""Adoption: the processes in a pod's cgroup are the truth, and a container never runs twice.

A restarted agent calls `adopt_containers` for each saved pod record; every sync calls `reconcile_containers`
first. Each container process is known by its container cgroup and the identity stamped at spawn
(identity.py), so one the record does not name (the agent died after the spawn, before the record was
saved; or while the child had joined its cgroup but not exec'd) is still found. Per container one
process is kept (the one the runtime tracks, else the one the record names, else the oldest); a kept process
the runtime did not start is recorded as adopted (ContainerRecord.adopted, which the status manager reads to
emit no second Started event), and every other copy is killed and logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from agent.container.podrecord import RUNNING, ContainerRecord, PodRecord, rfc3339
from agent.kuberuntime.identity import StampedProcess, stamped_processes
from agent.kuberuntime.pleg import ProcessTable, mark_exited
from agent.kuberuntime.processes import (
    UNKNOWN_EXIT_CODE,
    AdoptedProcess,
    ContainerProcess,
    is_same_process_alive,
    kill_session,
)

log = logging.getLogger(__name__)


def adopt_containers(
    table: ProcessTable, record: PodRecord, pids_in_cgroup: set[int], clock: Callable[[], float]
) -> list[str]:
    """Take over the pod's running container processes; returns the adopted container names.

    A container the record says runs, but whose process is gone, is marked exited (status unknown)."""
    adopted = reconcile_containers(table, record, pids_in_cgroup, clock, kill_unknown=False)
    for c in record.containers.values():
        if c.state != RUNNING or c.name in adopted:
            continue
        if (
            # A process started by an agent that did not stamp identities: pid and start time.
            c.pid is not None
            and c.create_time is not None
            and c.pid in pids_in_cgroup
            and is_same_process_alive(c.pid, c.create_time)
        ):
            table.put(record.uid, c.name, AdoptedProcess(c.pid, c.create_time))
            c.started_clock, c.adopted = clock(), True
            adopted.append(c.name)
        else:
            mark_exited(
                c, UNKNOWN_EXIT_CODE, "ContainerStatusUnknown", "gone while the agent was down", clock()
            )
    return adopted


def reconcile_containers(
    table: ProcessTable,
    record: PodRecord,
    pids_in_cgroup: set[int],
    clock: Callable[[], float],
    *,
    kill_unknown: bool,
) -> list[str]:
    """Match the stamped processes in the pod cgroup to the record's containers.

    Per container, one process is kept: the one the agent tracks, else the one the record names,
    else the oldest. It is adopted when the agent did not track it; every other copy is killed.
    With `kill_unknown`, processes of containers the record does not have are killed too.
    Returns the names of the containers adopted."""
    by_container: dict[str, list[StampedProcess]] = {}
    for p in stamped_processes(pids_in_cgroup):
        if p.identity.pod_uid == record.uid:
            by_container.setdefault(p.identity.container, []).append(p)
    adopted = []
    for name, copies in by_container.items():
        c = record.containers.get(name)
        if c is None:
            if kill_unknown:
                for p in copies:
                    log.warning("pod %s: killing pid %d of unknown container %s", record.key, p.pid, name)
                    kill_session(p.pid)
            continue
        tracked = table.get(record.uid, name)
        keep = _copy_to_keep(c, copies, tracked)
        for p in copies:
            if keep is not None and _same_spawn(p, keep):
                continue  # the kept spawn, or a descendant of it that started its own session
            log.warning(
                "pod %s container %s: killing extra copy pid %d (keeping %s)",
                record.key,
                name,
                p.pid,
                f"pid {keep.pid}" if keep else f"pid {tracked.pid if tracked else '?'}",
            )
            kill_session(p.pid)
        if keep is not None and (tracked is None or tracked.pid != keep.pid):
            table.put(record.uid, name, AdoptedProcess(keep.pid, keep.create_time))
            c.state, c.reason, c.message, c.exit_code = RUNNING, "", "", None
            c.pid, c.create_time, c.started_clock = keep.pid, keep.create_time, clock()
            c.adopted = True
            c.started_at = c.started_at or rfc3339(keep.create_time)
            log.info("pod %s container %s: adopted running pid %d", record.key, name, keep.pid)
            adopted.append(name)
    return adopted


def _copy_to_keep(
    c: ContainerRecord, copies: list[StampedProcess], tracked: ContainerProcess | None
) -> StampedProcess | None:
    if tracked is not None and tracked.poll() is None:
        # The agent's own live process wins; if it is not among the copies (not stamped), none is kept.
        return next((p for p in copies if p.pid == tracked.pid), None)
    named = [p for p in copies if p.pid == c.pid and c.create_time is not None]
    return named[0] if named else copies[0]


def _same_spawn(p: StampedProcess, keep: StampedProcess) -> bool:
    """Whether `p` is (part of) the kept spawn. One without a spawn id beside a kept spawn (in the container's
    cgroup, but its stamp dropped: a descendant in a session of its own that cleared its environment) is
    taken to be the container's own: the copy a dead agent left mid-spawn dies with it before it could
    be in the cgroup unseen (processes._prepare_child), so no second spawn is ever unstamped there."""
    return p.identity == keep.identity or (p.identity.spawn_id == "" and keep.identity.spawn_id != "")
