"""The probe manager and its workers with an injected clock and an inline executor: kube's defaults,
thresholds, initial delay, startup gating, liveness holds, restarts, bad ports and the metric."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent.container.execresult import ExecResult, ExecRunner
from agent.prober.manager import ProbeManager
from agent.prober.spec import ProbeSpec, ProbeType, parse_probe, probes_of
from agent.prober.worker import ContainerView
from kubenode.model import Container, Pod


class World:
    """One container whose exec probes answer `healthy`; the clock is stepped by hand."""

    def __init__(self, probes: dict[str, Any], ports: Sequence[dict[str, Any]] = ()) -> None:
        container = {"name": "app", "command": ["sleep", "1"], "ports": list(ports), **probes}
        self.pod = Pod(
            "web",
            uid="uid-1",
            containers=(Container("app", command=("sleep", "1")),),
            raw={"spec": {"containers": [container]}},
        )
        self.now = 1000.0
        self.healthy = {"check": True}
        self.view: ContainerView | None = ContainerView("1:100", True, self.now)
        self.changes: list[str] = []
        self.unhealthy: list[str] = []
        self.events: list[tuple[str, str, str]] = []
        self.counted: list[tuple[str, str | None]] = []
        self.manager = ProbeManager(lambda uid, name: self.view, self.runner, clock=lambda: self.now)
        self.manager.on_change = self.changes.append
        self.manager.on_unhealthy = self.unhealthy.append
        self.manager.events = lambda pod, c, kind, reason, text: self.events.append((kind, reason, text))
        self.manager.count = lambda spec, pod, result: self.counted.append((spec.kind.value, result))
        self.manager.add_pod(self.pod)

    def runner(self, pod: Pod, container: str) -> ExecRunner:
        def run(command: Sequence[str], timeout: float) -> ExecResult:
            ok = self.healthy[command[0]]
            return ExecResult(0 if ok else 1, b"" if ok else b"not healthy\n")

        return run

    def tick(self, seconds: float = 0.0) -> None:
        self.now += seconds
        self.manager.run_due(self.now)

    def status(self) -> tuple[bool, bool]:
        return self.manager.status("uid-1", "app", self.view is not None and self.view.running)


def exec_probe(command: str = "check", **fields: int) -> dict[str, Any]:
    return {"exec": {"command": [command]}, "periodSeconds": 1, **fields}


def test_defaults_are_kubes() -> None:
    spec = parse_probe("u", {"name": "c", "livenessProbe": {"tcpSocket": {"port": 80}}}, ProbeType.LIVENESS)
    assert spec == ProbeSpec(
        "u", "c", ProbeType.LIVENESS, "tcpSocket", {"port": 80}, 0, 10, 1, 1, 3, None, (), ""
    )


def test_a_broken_probe_is_kept_with_its_error() -> None:
    container = {
        "name": "c",
        "readinessProbe": {"exec": {"command": ["x"]}, "tcpSocket": {"port": 1}},
        "livenessProbe": {"tcpSocket": {"port": 1}, "successThreshold": 2},
    }
    pod = Pod("p", uid="u", containers=(Container("c"),), raw={"spec": {"containers": [container]}})
    errors = {p.kind: p.error for p in probes_of(pod)}
    assert "needs exactly one of" in errors[ProbeType.READINESS]
    assert "successThreshold: must be 1 for a liveness probe" in errors[ProbeType.LIVENESS]


def test_readiness_follows_the_thresholds() -> None:
    world = World({"readinessProbe": exec_probe(successThreshold=2, failureThreshold=2)})
    world.tick()
    assert world.status() == (True, False)  # one success of two
    world.tick(1)
    assert world.status() == (True, True)
    assert world.changes == ["uid-1"]
    world.healthy["check"] = False
    world.tick(1)
    assert world.status() == (True, True)  # one failure of two
    world.tick(1)
    assert world.status() == (True, False)
    assert world.events[-1] == ("Warning", "Unhealthy", "Readiness probe failed: not healthy\n")
    assert ("Readiness", "failed") in world.counted and ("Readiness", "successful") in world.counted


def test_nothing_runs_before_the_initial_delay() -> None:
    world = World({"readinessProbe": exec_probe(initialDelaySeconds=5)})
    for _ in range(4):
        world.tick(1)
    assert world.counted == [] and world.status() == (True, False)
    world.tick(1)
    assert world.status() == (True, True)


def test_startup_gates_liveness_and_readiness() -> None:
    world = World(
        {
            "startupProbe": exec_probe("started", failureThreshold=30),
            "livenessProbe": exec_probe("check"),
            "readinessProbe": exec_probe("check"),
        }
    )
    world.healthy["started"] = False
    world.healthy["check"] = False  # would fail liveness if it ran
    for _ in range(5):
        world.tick(1)
    assert world.status() == (False, False)
    assert {kind for kind, _ in world.counted} == {"Startup"}
    assert world.unhealthy == []
    world.healthy["started"] = world.healthy["check"] = True
    world.tick(1)
    assert world.status() == (True, False)  # readiness runs from the next tick on
    world.tick(1)
    assert world.status() == (True, True)
    counted = len([c for c in world.counted if c[0] == "Startup"])
    world.tick(1)
    assert len([c for c in world.counted if c[0] == "Startup"]) == counted  # startup is done


def test_liveness_failure_holds_until_the_container_is_replaced() -> None:
    world = World({"livenessProbe": exec_probe(failureThreshold=3)})
    world.healthy["check"] = False
    for _ in range(3):
        world.tick(1)
    assert world.unhealthy == ["uid-1"]
    assert world.manager.failed_probe("uid-1", "app", "1:100") is not None
    assert world.manager.failed_probe("uid-1", "app", "2:200") is None  # a restarted container is not killed
    probes = len(world.counted)
    world.tick(1)
    world.tick(1)
    assert len(world.counted) == probes  # on hold
    world.view = ContainerView("2:200", True, world.now)  # restarted
    world.healthy["check"] = True
    world.tick(1)
    assert world.manager.failed_probe("uid-1", "app", "2:200") is None
    assert len(world.counted) == probes + 1


def test_a_stopped_container_is_not_ready_and_never_means_the_worker_stops() -> None:
    # (A deleting pod's readiness probe stops the same way: not ready until the pod is gone.)
    world = World({"readinessProbe": exec_probe()})
    world.tick()
    assert world.status() == (True, True)
    world.view = ContainerView("1:exited", False, None, restart_never=True)
    world.tick(1)
    assert world.status() == (False, False)
    assert world.manager.probe_count() == 0
    world.tick(1)
    assert world.status() == (False, False)  # a stopped probe keeps its last result
    world.manager.remove_pod("uid-1")
    assert world.counted[-1] == ("Readiness", None)  # its series dropped with the pod


def test_an_undeclared_port_name_errors_with_its_name_and_changes_nothing() -> None:
    probe = {"httpGet": {"port": "metrics", "path": "/"}, "periodSeconds": 1}
    world = World({"readinessProbe": probe}, ports=[{"name": "http", "containerPort": 8080}])
    world.tick()
    assert world.status() == (True, False)
    kind, reason, message = world.events[-1]
    assert (kind, reason) == ("Warning", "Unhealthy")
    assert message == "Readiness probe errored: port 'metrics' not found in the ports of container app"
    assert world.counted[-1] == ("Readiness", "unknown")


def test_removed_pods_are_never_probed_again() -> None:
    world = World({"readinessProbe": exec_probe(), "livenessProbe": exec_probe()})
    world.tick()
    world.manager.remove_pod("uid-1")
    probes = len([c for c in world.counted if c[1] is not None])
    for _ in range(3):
        world.tick(1)
    assert len([c for c in world.counted if c[1] is not None]) == probes
    assert world.manager.probe_count() == 0 and world.manager._heap == []


def test_a_deleting_pod_is_not_ready_while_liveness_goes_on() -> None:
    world = World({"readinessProbe": exec_probe(), "livenessProbe": exec_probe()})
    world.tick()
    assert world.status() == (True, True)
    world.view = ContainerView("1:100", True, world.now, pod_deleting=True)
    world.tick(1)
    assert world.status() == (True, False)
    liveness = len([c for c in world.counted if c[0] == "Liveness"])
    world.tick(1)
    assert world.status() == (True, False)
    assert len([c for c in world.counted if c[0] == "Liveness"]) == liveness + 1
