"""The pod status with probes: started and ready from the prober, ContainersReady and Ready, readiness gates
with the kubelet's reason and messages."""

from __future__ import annotations

from typing import Any

from agent.container.podrecord import RUNNING, ContainerRecord, PodRecord
from agent.status.podstatus import api_pod_status
from kubenode.model import Container, Pod


def pod(gates: list[str], conditions: list[dict[str, Any]]) -> Pod:
    raw = {
        "spec": {"readinessGates": [{"conditionType": g} for g in gates], "containers": [{"name": "app"}]},
        "status": {"conditions": conditions},
    }
    return Pod("web", uid="u", containers=(Container("app", command=("sleep", "1")),), raw=raw)


def running_record() -> PodRecord:
    record = PodRecord("u", "default", "web", phase="Running", cgroup="/kubepods/podu")
    record.containers["app"] = ContainerRecord("app", state=RUNNING, pid=1, started_at="2026-01-01T00:00:00Z")
    return record


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_the_probers_started_and_ready_are_the_containers() -> None:
    status = api_pod_status(
        pod([], []), running_record(), "10.0.0.1", probes=lambda uid, c, running: (True, False)
    )
    container = status["containerStatuses"][0]
    assert (container["started"], container["ready"]) == (True, False)
    ready = conditions(status)
    assert ready["ContainersReady"]["status"] == "False"
    assert ready["Ready"]["reason"] == "ContainersNotReady"
    assert ready["Ready"]["message"] == "containers with unready status: [app]"


def test_readiness_gates() -> None:
    status = api_pod_status(pod(["example.com/lb"], []), running_record(), "10.0.0.1")
    ready = conditions(status)
    assert ready["ContainersReady"]["status"] == "True"
    assert (ready["Ready"]["status"], ready["Ready"]["reason"]) == ("False", "ReadinessGatesNotReady")
    assert (
        ready["Ready"]["message"]
        == 'corresponding condition of pod readiness gate "example.com/lb" does not exist.'
    )
    gated = pod(["example.com/lb"], [{"type": "example.com/lb", "status": "False"}])
    message = conditions(api_pod_status(gated, running_record(), "10.0.0.1"))["Ready"]["message"]
    assert message == 'the status of pod readiness gate "example.com/lb" is not "True", but False'
    opened = pod(["example.com/lb"], [{"type": "example.com/lb", "status": "True"}])
    assert conditions(api_pod_status(opened, running_record(), "10.0.0.1"))["Ready"]["status"] == "True"


def test_the_status_names_the_generation_it_answers() -> None:
    """kube-apiserver 1.37 gives pods a metadata.generation and a 1.37 kubelet reports it back as
    status.observedGeneration and on its conditions (PodObservedGenerationTracking, GA in 1.35); the agent
    wrote neither (docs/interop.md). A pod with no generation (a static pod, an older server) gets none."""
    generated = pod([], [])
    generated = Pod("web", uid="u", containers=generated.containers,
                    raw={**generated.raw, "metadata": {"name": "web", "generation": 3}})  # fmt: skip
    status = api_pod_status(generated, running_record(), "10.0.0.1")
    assert status["observedGeneration"] == 3
    assert {c["observedGeneration"] for c in status["conditions"]} == {3}
    plain = api_pod_status(pod([], []), running_record(), "10.0.0.1")
    assert "observedGeneration" not in plain
    assert not any("observedGeneration" in c for c in plain["conditions"])
