"""Helpers for live-scheduler tests against a real `kubenode apiserver` process.

- objects: `node(...)`, `pod(...)` build API objects; `create_all` creates them concurrently;
- `BindingWatch`: a watch on every pod recording each uid's nodeName values, to prove that
  no pod was ever bound twice (its node never changes once set);
- `FakeKubelet`: finishes graceful deletions (DELETE with grace 0 and a uid precondition),
  which a kubelet would do once the containers stop; no agent runs in these tests;
- `check_no_overcommit`: for every node, the requests of the pods bound to it (from the API)
  are within its allocatable, resource by resource;
- `SchedulerProcess`: `kubenode scheduler run` as a subprocess (for SIGKILL and the CLI);
- `wait_for(condition, timeout, what)`: poll with a deadline, failing with what was awaited.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from kubenode.kubeclient import (
    NODES,
    PODS,
    AlreadyExists,
    KubeClient,
    KubeError,
    NotFound,
    TransportError,
    load_kubeconfig,
)
from kubenode.model.parse import parse_node, parse_pod

ROOT = Path(__file__).parents[2]
T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def client_for(kubeconfig: Path | str, pool_size: int = 16) -> KubeClient:
    return KubeClient(load_kubeconfig(kubeconfig), pool_size=pool_size)


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110", **extra: str) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **extra}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


def pod(
    name: str,
    *,
    cpu: str = "100m",
    memory: str = "64Mi",
    namespace: str = "default",
    scheduler: str = "default-scheduler",
    priority: int | None = None,
    grace: int | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory, **(extra or {})}
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [
            {"name": "c", "image": "pause", "resources": {"requests": requests, "limits": requests}}
        ],
    }
    if priority is not None:
        # kube's Priority admission sets spec.priority from the class and refuses a pod that gives it
        # itself: a PriorityClass per value, made by create_all.
        spec["priorityClassName"] = priority_class_name(priority)
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def priority_class_name(value: int) -> str:
    return f"test-priority-{value}"


def ensure_priority_classes(client: KubeClient, objects: Iterable[dict[str, Any]]) -> None:
    """The PriorityClass of each test-priority-<N> that a pod names (value N), made once."""
    names = {
        name
        for obj in objects
        if (name := (obj.get("spec") or {}).get("priorityClassName", "")).startswith("test-priority-")
    }
    for name in sorted(names):
        value = int(name.removeprefix("test-priority-"))
        with contextlib.suppress(AlreadyExists):
            body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}}
            client.request("POST", PRIORITY_CLASSES, body={**body, "value": value})


def create_all(client: KubeClient, objects: Iterable[dict[str, Any]], workers: int = 8) -> None:
    objects = list(objects)
    ensure_priority_classes(client, objects)

    def create(obj: dict[str, Any]) -> None:
        for attempt in range(50):  # a restarting server: retry (a create that landed is AlreadyExists)
            try:
                if obj["kind"] == "Node":
                    client.create(NODES, obj)
                else:
                    client.create(PODS, obj, obj["metadata"]["namespace"])
                return
            except AlreadyExists:
                if attempt == 0:
                    raise
                return
            except TransportError:
                time.sleep(0.1)
        raise AssertionError(f"could not create {obj['metadata']['name']}")

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(create, objects))


def list_pods(client: KubeClient) -> list[dict[str, Any]]:
    return client.list_all(PODS)[0]


def bound_count(client: KubeClient, scheduler: str | None = None) -> int:
    return sum(
        1
        for p in list_pods(client)
        if p["spec"].get("nodeName") and (scheduler is None or p["spec"].get("schedulerName") == scheduler)
    )


def empty_the_cluster(client: KubeClient) -> None:
    """Delete every pod (grace 0) and node, and wait until none is left: a module's shared API
    server is emptied after each test."""
    for obj in list_pods(client):
        meta = obj["metadata"]
        with contextlib.suppress(NotFound):
            client.delete(PODS, meta["name"], meta["namespace"], grace_period_seconds=0)
    for obj in client.list_all(NODES)[0]:
        with contextlib.suppress(NotFound):
            client.delete(NODES, obj["metadata"]["name"])
    wait_for(lambda: not list_pods(client) and not client.list_all(NODES)[0], 10, "an empty cluster")


def check_no_overcommit(client: KubeClient) -> None:
    """Every node's bound requests <= allocatable, for every resource (pods counted too)."""
    nodes = {n.name: n for n in (parse_node(obj) for obj in client.list_all(NODES)[0])}
    used: dict[str, dict[str, int]] = {name: {} for name in nodes}
    for obj in list_pods(client):
        parsed = parse_pod(obj)
        if not parsed.node_name or parsed.phase in ("Succeeded", "Failed"):
            continue
        assert parsed.node_name in nodes, f"{parsed.key} bound to unknown node {parsed.node_name}"
        totals = used[parsed.node_name]
        totals["pods"] = totals.get("pods", 0) + 1
        for resource, amount in parsed.requests.items():
            totals[resource] = totals.get(resource, 0) + amount
    for name, totals in used.items():
        for resource, amount in totals.items():
            have = nodes[name].allocatable.get(resource, 0)
            assert amount <= have, f"node {name} over-committed: {resource} {amount} > {have}"


class BindingWatch:
    """Records every nodeName each pod uid ever had, from a watch on all pods."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.nodes: dict[str, set[str]] = {}
        self.names: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._stream: Any = None

    def __enter__(self) -> BindingWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._stream is not None:
            self._stream.close()
        self._thread.join(5)

    def _run(self) -> None:
        version = "0"  # "0": the pods that exist now arrive as ADDED first, then every change
        while not self._stop.is_set():
            try:
                self._stream = self.client.watch(PODS, resource_version=version, timeout_seconds=60)
                for event in self._stream:
                    obj = event.get("object") or {}
                    meta = obj.get("metadata") or {}
                    if meta.get("resourceVersion"):
                        version = str(meta["resourceVersion"])
                    node_name = (obj.get("spec") or {}).get("nodeName")
                    if event.get("type") in ("ADDED", "MODIFIED") and node_name:
                        uid = str(meta.get("uid"))
                        self.nodes.setdefault(uid, set()).add(node_name)
                        self.names[uid] = f"{meta.get('namespace')}/{meta.get('name')}"
            except KubeError:
                if self._stop.wait(0.2):
                    return

    def assert_bound_at_most_once(self) -> None:
        twice = {self.names[uid]: sorted(nodes) for uid, nodes in self.nodes.items() if len(nodes) > 1}
        assert not twice, f"pods bound to more than one node: {twice}"


class FakeKubelet:
    """Completes graceful deletions of bound pods (the kubelet's final DELETE, grace 0)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.finished: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> FakeKubelet:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                for obj in list_pods(self.client):
                    meta = obj["metadata"]
                    if meta.get("deletionTimestamp") and obj["spec"].get("nodeName"):
                        try:
                            self.client.delete(
                                PODS, meta["name"], meta["namespace"], grace_period_seconds=0, uid=meta["uid"]
                            )
                            self.finished.append(f"{meta['namespace']}/{meta['name']}")
                        except NotFound:
                            pass
            except KubeError:
                continue


class SchedulerProcess:
    """`kubenode scheduler run` as a real process."""

    def __init__(self, kubeconfig: Path | str, *args: str, log_path: Path | None = None) -> None:
        command = [sys.executable, "-m", "cli.main", "scheduler", "run", "--kubeconfig", str(kubeconfig)]
        self.log_path = log_path
        self._log = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            [*command, *args],
            cwd=ROOT,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self._log is not subprocess.DEVNULL:
            self._log.close()  # type: ignore[union-attr]
        return self.proc.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""
