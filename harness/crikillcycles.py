"""SIGKILL an agent that runs CRI pods at points across syncPod, restart it, and count what containerd holds.

Run as `python -m harness.crikillcycles ROOT MANIFESTS STATE ENDPOINT LOGS CYCLES PODS`; prints one JSON
object (and a line per cycle on stderr).
The CRI sibling of harness/killcycles.py: there the processes are the agent's own; here they are containerd's,
so the truth is what the runtime lists (by the kubelet's labels and the agent's node label) and what the
cgroup hierarchies hold.

Flow of each cycle: a new batch of pods is written (the previous batch's manifests are removed, so the agent
also terminates the previous batch as orphans) -> agent A starts with a kill point, a CRI method and a count:
right after its Nth successful call of that method it SIGKILLs itself (KILL_POINTS: after RunPodSandbox,
after CreateContainer, after StartContainer, and during termination after StopContainer, StopPodSandbox,
RemovePodSandbox) -> agent B starts on the same state, containerd and cgroups, without a kill point -> the
parent waits, with a deadline, until the runtime holds exactly the batch: per pod one ready sandbox and one
running container per app container, nothing of any other pod, and no pod cgroup of another pod in any
mounted v1 hierarchy (runc makes a CRI pod's cgroup path in every one) -> what it holds then is counted ->
B is SIGKILLed too. After the last cycle an agent with no pods must leave nothing at all.

Agents are forked from a fork server that imported the agent but never opened a gRPC channel (gRPC cannot
be forked once used), while the parent asks containerd over its own channel.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import signal
import sys
import time
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from agent.cm.cgroups.v1 import V1_CONTROLLERS, other_hierarchies
from agent.kuberuntime.cri import labels
from agent.kuberuntime.cri.client import CRIClient
from harness.crikillagent import NODE, run_agent
from harness.killcycles import wait_for
from harness.manifests import write_manifest
from harness.ociimage import BUSYBOX_IMAGE
from kubenode.api.cri.v1 import api_pb2 as cri
from kubenode.cgroupsweep import V1_MOUNT

APP_CONTAINERS = ("main", "side")
# (CRI method, which call of it): agent A kills itself right after that call returned. Calls count from the
# agent's start; the termination points land while A terminates the previous batch (from the second cycle).
KILL_POINTS = (
    ("RunPodSandbox", 1),
    ("StopContainer", 1),
    ("CreateContainer", 1),
    ("StopPodSandbox", 1),
    ("StartContainer", 1),
    ("RemovePodSandbox", 2),
    ("CreateContainer", 4),
    ("StopContainer", 3),
    ("StartContainer", 5),
    ("RunPodSandbox", 2),
)
KILL_DEADLINE_S = 30.0  # a point never reached: A is killed by the parent and the point counted as missed
CONVERGE_DEADLINE_S = 60.0  # only reached when what containerd holds never converges


def write_batch(manifests: Path, cycle: int, pods: int) -> list[str]:
    for old in manifests.iterdir():
        old.unlink()
    uids = []
    # A TERM trap: the container ends at once when stopped (pid 1 ignores signals it has no handler for).
    command = '["/bin/sh", "-c", "trap \'exit 0\' TERM; sleep 600 & wait"]'
    for p in range(pods):
        uid = f"crikill-{cycle}-{p}"
        image = f'image: "{BUSYBOX_IMAGE}", imagePullPolicy: IfNotPresent'
        apps = "".join(
            f"""
              - {{name: {name}, {image}, command: {command}}}"""
            for name in APP_CONTAINERS
        )
        text = f"""\
            apiVersion: v1
            kind: Pod
            metadata: {{name: c{cycle}-p{p}, uid: {uid}}}
            spec:
              terminationGracePeriodSeconds: 1
              initContainers:
              - {{name: setup, {image}, command: [/bin/true]}}
              containers:{apps}
            """
        write_manifest(manifests, f"c{cycle}-p{p}.yaml", text)
        uids.append(uid)
    return uids


@dataclasses.dataclass
class Holdings:
    """What containerd and the cgroups hold, measured against the wanted pods."""

    missing_running: int = 0  # app containers of wanted pods with no running copy
    extra_running: int = 0  # running copies beyond one per app container
    extra_sandboxes: int = 0  # ready sandboxes beyond one per wanted pod
    unowned_sandboxes: int = 0  # sandboxes of pods no one wants
    unowned_containers: int = 0  # containers of pods no one wants
    leaked_pod_cgroups: int = 0  # pod cgroup directories of pods no one wants, over every v1 hierarchy
    leaked_container_cgroups: int = 0  # directories in wanted pods' cgroups of no sandbox or container

    def clean(self) -> bool:
        return not any(dataclasses.astuple(self))


def hierarchies() -> list[Path]:
    managed = {os.path.realpath(V1_MOUNT / c) for c in V1_CONTROLLERS if (V1_MOUNT / c).is_dir()}
    return sorted({Path(p) for p in managed} | {Path(h) for h in other_hierarchies(V1_MOUNT, managed)})


def pod_cgroups(root: str) -> list[tuple[str, list[str]]]:
    """(pod UID, the directories in it: runc's, one per sandbox and container) for every pod cgroup
    directory under `root`, once per hierarchy that has it."""
    found = []
    for hierarchy in hierarchies():
        for current, dirs, _files in os.walk(hierarchy / root.strip("/")):
            for name in list(dirs):
                if name.startswith("pod"):
                    dirs.remove(name)
                    inside = subdirectories(os.path.join(current, name))
                    if inside is not None:  # None: removed since it was listed, so gone
                        found.append((name[len("pod") :], inside))
    return found


def subdirectories(path: str) -> list[str] | None:
    """The directories in `path`, or None when it does not exist (any more): runc and the agent remove
    cgroups while they are read, and one removed between the listing and the scan is simply gone."""
    try:
        with os.scandir(path) as entries:
            return [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return None


def listed(client: CRIClient, selector: dict[str, str]) -> tuple[list[cri.PodSandbox], list[cri.Container]]:
    """The sandboxes and the containers whose labels match `selector`."""
    sandboxes = client.call(
        client.runtime.ListPodSandbox,
        cri.ListPodSandboxRequest(filter=cri.PodSandboxFilter(label_selector=selector)),
    ).items
    containers = client.call(
        client.runtime.ListContainers,
        cri.ListContainersRequest(filter=cri.ContainerFilter(label_selector=selector)),
    ).containers
    return list(sandboxes), list(containers)


def holdings(client: CRIClient, root: str, wanted: list[str]) -> Holdings:
    sandboxes, containers = listed(client, {labels.NODE: NODE})
    found = Holdings()
    for uid in wanted:
        ready = [s for s in sandboxes if s.labels[labels.POD_UID] == uid and s.state == cri.SANDBOX_READY]
        found.extra_sandboxes += max(0, len(ready) - 1)
        for name in APP_CONTAINERS:
            running = [
                c
                for c in containers
                if c.labels[labels.POD_UID] == uid
                and c.labels[labels.CONTAINER_NAME] == name
                and c.state == cri.CONTAINER_RUNNING
            ]
            found.missing_running += not running
            found.extra_running += max(0, len(running) - 1)
    found.unowned_sandboxes = sum(s.labels[labels.POD_UID] not in wanted for s in sandboxes)
    found.unowned_containers = sum(c.labels[labels.POD_UID] not in wanted for c in containers)
    cgroups = pod_cgroups(root)  # listed after the runtime: a container made meanwhile has no cgroup yet
    known = {s.id for s in sandboxes} | {c.id for c in containers}
    found.leaked_pod_cgroups = sum(uid not in wanted for uid, _ in cgroups)
    found.leaked_container_cgroups = sum(
        name not in known for uid, inside in cgroups if uid in wanted for name in inside
    )
    return found


class Cycles:
    """Forks the agents and measures what each cycle leaves."""

    def __init__(self, root: str, manifests: Path, state: Path, endpoint: str, logs: Path) -> None:
        self.root, self.manifests, self.state, self.logs = root, manifests, state, logs
        self.endpoint = endpoint
        self.context = multiprocessing.get_context("forkserver")
        self.context.set_forkserver_preload(["harness.crikillagent"])
        self.client = CRIClient.connect(endpoint)
        self.totals = Holdings()
        self.missed_points = 0
        self.deaths: list[str] = []  # agents that died on their own: which, and their exit code
        self.per_cycle: list[dict[str, Any]] = []

    def start(self, point: str = "", nth: int = 0) -> BaseProcess:
        args = (self.root, self.manifests, self.state, self.endpoint, self.logs, point, nth)
        process = self.context.Process(target=run_agent, args=args, daemon=True)
        process.start()
        return process

    def stop(self, process: BaseProcess, which: str) -> None:
        """SIGKILL an agent; one that was no longer running died on its own, which it never should."""
        if not process.is_alive():
            self.deaths.append(f"{which}: exit code {process.exitcode}")
        process.kill()
        process.join()

    def run(self, uids: list[str], point: str, nth: int) -> None:
        """Agent A up to its kill point (none: no agent A), then agent B until containerd holds the batch."""
        if point:
            agent = self.start(point, nth)
            agent.join(KILL_DEADLINE_S)
            if agent.is_alive():
                self.missed_points += 1
                self.stop(agent, f"A ({point}#{nth})")
            elif agent.exitcode != -signal.SIGKILL:
                self.deaths.append(f"A ({point}#{nth}): exit code {agent.exitcode}")
        begun = time.monotonic()
        agent = self.start()
        wait_for(lambda: holdings(self.client, self.root, uids).clean(), CONVERGE_DEADLINE_S, poll_s=0.1)
        found = holdings(self.client, self.root, uids)
        if not found.clean() and agent.pid is not None:
            os.kill(agent.pid, signal.SIGUSR1)  # its threads' stacks, into CRIKILL_LOG when set
            time.sleep(0.5)
        self.stop(agent, f"B after {point}#{nth}")
        for field in dataclasses.fields(Holdings):
            setattr(self.totals, field.name, getattr(self.totals, field.name) + getattr(found, field.name))
        self.per_cycle.append({"point": f"{point}#{nth}" if point else "none", **dataclasses.asdict(found)})
        print(f"{self.per_cycle[-1]} in {time.monotonic() - begun:.1f} s", file=sys.stderr, flush=True)


def main() -> int:
    root, manifests, state, endpoint, logs = sys.argv[1:6]
    cycles, pods = int(sys.argv[6]), int(sys.argv[7])
    first_point = int(os.environ.get("CRIKILL_FIRST_POINT", "0"))  # to replay one point
    run = Cycles(root, Path(manifests), Path(state), endpoint, Path(logs))
    begun = time.monotonic()
    for cycle in range(cycles):
        uids = write_batch(run.manifests, cycle, pods)
        run.run(uids, *KILL_POINTS[(cycle + first_point) % len(KILL_POINTS)])
    for old in run.manifests.iterdir():
        old.unlink()
    run.run([], "", 0)  # no pods wanted any more: everything must go
    run.client.close()
    result = {
        "cycles": cycles,
        "pods": pods,
        **dataclasses.asdict(run.totals),
        "missed_kill_points": run.missed_points,
        "agents_that_died_on_their_own": run.deaths,
        "unclean_cycles": [c for c in run.per_cycle if any(v for k, v in c.items() if k != "point")],
        "seconds": round(time.monotonic() - begun, 1),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
