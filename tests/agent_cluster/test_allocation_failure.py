"""A device plugin whose Allocate fails: the pod gets phase Failed with the kubelet's UnexpectedAdmissionError
(naming the resource and the plugin's error) and an event, while the node's other pods keep running."""

from __future__ import annotations

from collections.abc import Callable

from harness.agent import AgentProcess
from kubenode.kubeclient import NODES, PODS, KubeClient
from tests.agent_cluster.support import events_for, phase_is, pod_body, wait_until
from tests.conformance.fake_device_plugin import FakeDevice, FakePlugin


def test_failed_allocate_fails_the_pod_only(
    admin: KubeClient, make_agent: Callable[..., AgentProcess]
) -> None:
    agent = make_agent().start()
    plugin = FakePlugin(
        agent.plugin_dir, "example.com/flaky", [FakeDevice("f0")], allocate_error="device on fire"
    )
    plugin.serve()
    try:
        plugin.register()
        wait_until(
            lambda: admin.get(NODES, agent.node)["status"]["allocatable"].get("example.com/flaky") == "1",
            10,
            "the flaky resource in allocatable",
        )
        bystander = f"bystander-{agent.node}"
        admin.create(PODS, pod_body(bystander, agent.node), "default")
        wait_until(lambda: phase_is(admin, bystander, "Running"), 20, "the bystander Running")
        victim = f"victim-{agent.node}"
        admin.create(
            PODS, pod_body(victim, agent.node, resources={"limits": {"example.com/flaky": "1"}}), "default"
        )
        status = wait_until(lambda: phase_is(admin, victim, "Failed"), 20, "the pod Failed")
        assert status["reason"] == "UnexpectedAdmissionError"
        assert "example.com/flaky" in status["message"] and "device on fire" in status["message"]
        wait_until(lambda: events_for(admin, victim, "UnexpectedAdmissionError"), 10, "its Warning event")
        assert phase_is(admin, bystander, "Running")
    finally:
        plugin.stop()
