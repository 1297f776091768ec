"""Scheduler-side pieces without a server: bad pods, 409 on bind, status-write dedupe."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubenode.kubeclient import Conflict
from kubenode.model.errors import ValidationError
from kubenode.model.objects import Pod
from kubenode.model.parse import parse_pod
from scheduler.apibinder import ApiBinder
from scheduler.clock import ManualClock
from scheduler.engine import Scheduler
from scheduler.informers import BadObject, EventRouter, SpecCache, decode_pod, decode_pod_update
from scheduler.simulate import InMemoryBinder
from scheduler.statuswriter import StatusWriter
from tests.scheduler_live.support import ROOT, pod


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def event(self, ref: Any, type: str, reason: str, message: str) -> None:
        self.events.append((ref.name, type, reason, message))


class Client:
    """Answers create with a chosen error and records patches."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.patches: list[tuple[str, Any]] = []

    def create(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if self.error is not None:
            raise self.error
        return {"kind": "Status", "status": "Success"}

    def patch(self, resource: Any, name: str, body: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.patches.append((name, body))
        return {}


def test_a_pod_that_fails_to_parse_is_reported_once_and_never_queued() -> None:
    engine = Scheduler(InMemoryBinder(), clock=ManualClock(), run_binding=lambda task: task())
    reported: list[BadObject] = []
    router = EventRouter(engine, reported.append)
    raw = pod("typo", cpu="two")
    raw["metadata"]["uid"] = "u-1"
    bad = decode_pod(raw)
    assert isinstance(bad, BadObject)
    router.pod_added(bad)
    router.pod_updated(bad, decode_pod(raw))  # the same object again: no second report
    assert len(reported) == 1
    assert reported[0].message.startswith("spec.containers[0].resources.limits.cpu: invalid quantity 'two'")
    assert engine.queue.where("default/typo") is None and engine.schedule_one() is None
    # Fixed by an update: it is queued and scheduled like any other pod.
    raw["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    router.pod_updated(bad, decode_pod(raw))
    assert engine.queue.where("default/typo") == "active"
    other = pod("theirs", cpu="two", scheduler="someone-else")
    router.pod_added(decode_pod(other))  # another scheduler's pod: not ours to report
    assert len(reported) == 1


def test_a_pods_binding_reuses_its_decoded_pod_and_any_other_change_is_parsed() -> None:
    created = pod("p", cpu="250m")
    created["metadata"].update(uid="u-1", resourceVersion="5", labels={"app": "web"})
    created["status"] = {"phase": "Pending"}
    pending = decode_pod(created)
    assert isinstance(pending, Pod)
    bound = copy.deepcopy(created)
    bound["metadata"].update(resourceVersion="6", generation=1)
    bound["spec"]["nodeName"] = "node-1"
    bound["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    reused = decode_pod_update(bound, pending)
    assert isinstance(reused, Pod)
    # The same as a full parse, but the parsed parts are the previous version's.
    assert reused == decode_pod(bound) and reused.node_name == "node-1" and reused.raw is bound
    assert reused.containers is pending.containers
    # Anything decode_pod reads is parsed again: a label, the phase, a nomination, the spec.
    for section, key, value in (
        ("metadata", "labels", {"app": "db"}),
        ("status", "phase", "Running"),
        ("status", "nominatedNodeName", "node-2"),
        ("spec", "priority", 7),
    ):
        changed = copy.deepcopy(bound)
        changed[section][key] = value
        parsed = decode_pod_update(changed, pending)
        assert parsed == decode_pod(changed) and parsed != reused
        assert isinstance(parsed, Pod) and parsed.raw is changed
    broken = copy.deepcopy(bound)
    broken["spec"]["nodeName"] = 3
    assert isinstance(decode_pod_update(broken, pending), BadObject)
    assert isinstance(decode_pod_update(bound, decode_pod(pod("x", cpu="two"))), Pod)  # was bad


def test_pods_of_one_spec_share_its_parse_and_decode_as_a_full_parse_does() -> None:
    cache = SpecCache(size=2)
    first, second = pod("a", cpu="250m"), pod("b", cpu="250m")
    second["metadata"]["labels"] = {"app": "web"}
    second["spec"]["nodeName"] = "node-1"  # not part of the key: a bound pod shares the parse too
    one, two = cache.decode(first), cache.decode(second)
    assert one == parse_pod(first, "api") and two == parse_pod(second, "api")
    assert two.containers is one.containers and cache.hits == 1
    assert (two.node_name, two.labels, two.name) == ("node-1", {"app": "web"}, "b")
    # requests, limits and QoS are the spec's, whichever pod they were computed on
    plain = parse_pod(second, "api")
    assert (two.requests, two.limits, two.qos_class) == (plain.requests, plain.limits, plain.qos_class)
    # another spec is parsed apart; a bad one is never kept, so each pod reports its own error
    other = cache.decode(pod("c", cpu="500m"))
    assert other.requests["cpu"] == 500 and other.containers is not one.containers
    for name in ("d", "e"):
        with pytest.raises(ValidationError, match="cpu"):
            cache.decode(pod(name, cpu="two"))
    assert cache.hits == 1
    cache.decode(pod("f", cpu="1"))  # a third spec: the oldest of two is dropped
    assert cache.decode(pod("g", cpu="250m")).containers is not one.containers


def test_409_already_assigned_is_success_and_other_conflicts_fail() -> None:
    target = Pod(name="p", uid="u")
    recorder = Recorder()
    elsewhere = Conflict(
        409,
        "Conflict",
        'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n2"',
    )
    ApiBinder(Client(elsewhere), recorder).bind(target, "n1")  # type: ignore[arg-type]
    assert recorder.events == []  # bound by someone else: their event, not ours
    ApiBinder(Client(), recorder).bind(target, "n1")  # type: ignore[arg-type]
    assert recorder.events == [("p", "Normal", "Scheduled", "Successfully assigned default/p to n1")]
    deleting = Conflict(409, "Conflict", "pod p is being deleted, cannot be assigned to a host")
    with pytest.raises(Conflict):
        ApiBinder(Client(deleting), recorder).bind(target, "n1")  # type: ignore[arg-type]


def test_status_is_written_only_when_the_message_or_nomination_changes() -> None:
    client, recorder = Client(), Recorder()
    writer = StatusWriter(client, recorder)  # type: ignore[arg-type]
    target = Pod(name="p", uid="u")
    try:
        writer.failed(target, "0/1 nodes are available: 1 Insufficient cpu.")
        writer.failed(target, "0/1 nodes are available: 1 Insufficient cpu.")
        writer.failed(target, "0/2 nodes are available: 2 Insufficient cpu.")
        writer.failed(target, "0/2 nodes are available: 2 Insufficient cpu.", "n1")
    finally:
        writer.close()
    assert len(recorder.events) == 4  # every attempt is an event (the recorder aggregates)
    assert [body["status"]["conditions"][0]["message"] for _, body in client.patches] == [
        "0/1 nodes are available: 1 Insufficient cpu.",
        "0/2 nodes are available: 2 Insufficient cpu.",
        "0/2 nodes are available: 2 Insufficient cpu.",
    ]
    last = client.patches[-1][1]
    assert last["status"]["nominatedNodeName"] == "n1" and last["metadata"] == {"uid": "u"}
    cond = last["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("PodScheduled", "False", "Unschedulable")


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cli.main", "scheduler", "run", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=60)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kubeconfig", "/nonexistent/kubeconfig"], "kubenode scheduler: /nonexistent/kubeconfig: "),
        (
            ["--metrics-bind-address", "localhost"],
            "kubenode scheduler: --metrics-bind-address: expected host:port, got 'localhost'",
        ),
        (
            ["--leader-elect", "--leader-elect-renew-deadline", "20"],
            "kubenode scheduler: --leader-elect: leaseDuration must be greater than renewDeadline",
        ),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    if "--kubeconfig" not in args:
        args = ["--kubeconfig", str(kubeconfig), *args]
    run = run_cli(*args)
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith(message) and len(run.stderr.strip().splitlines()) == 1, run.stderr
