"""Node registration racing a device plugin: devices that arrive while the Node is being created reach it."""

from __future__ import annotations

from pathlib import Path

from agent.apis.config import AgentConfig
from agent.nodestatus.reporter import NodeStatusReporter
from kubenode.kubeclient import KubeClient, NotFound
from kubenode.kubeclient.client import NODES
from tests.agent.support import wait_until


def test_devices_listed_during_registration_reach_the_node(admin: KubeClient, tmp_path: Path) -> None:
    # The device list arrives just after the status the Node is created with was computed: the first
    # status has no devices, every later one has the plugin's two. Only the periodic update can send them.
    calls = 0

    def devices() -> dict[str, int]:
        nonlocal calls
        calls += 1
        return {} if calls == 1 else {"example.com/dev": 2}

    config = AgentConfig(
        node_name="race-node", state_dir=tmp_path, manifests=tmp_path / "m", node_status_update_frequency=0.1
    )
    reporter = NodeStatusReporter(
        admin, config, base_capacity={"cpu": 2000, "memory": 1 << 30}, device_capacity=devices,
        device_allocatable=devices,
    )  # fmt: skip
    reporter.start()
    try:

        def capacity() -> dict[str, str] | None:
            try:
                return dict(admin.get(NODES, "race-node")["status"]["capacity"])
            except NotFound:
                return None

        created = wait_until(capacity, 10, "the Node registered")
        assert "example.com/dev" not in created
        node = wait_until(
            lambda: (c := capacity()) and "example.com/dev" in c and c,
            5,
            "the devices listed during registration in the Node's capacity",
        )
        assert node["example.com/dev"] == "2"
    finally:
        reporter.stop()
        admin.delete(NODES, "race-node")


def test_the_node_declares_websocket_streaming(admin: KubeClient, tmp_path: Path) -> None:
    """status.declaredFeatures names ExtendWebSocketsToKubelet, as a 1.37 kubelet's does: kube-apiserver
    1.37 then proxies kubectl's exec/attach/port-forward WebSockets to the agent unchanged. Without it
    kube-apiserver turned them into SPDY/3.1 upgrades, which the agent refuses: `kubectl exec` failed with
    "unable to upgrade connection" (docs/interop.md)."""
    config = AgentConfig(node_name="declaring-node", state_dir=tmp_path, manifests=tmp_path / "m")
    reporter = NodeStatusReporter(admin, config, base_capacity={"cpu": 2000, "memory": 1 << 30})
    reporter.register()
    try:
        node = admin.get(NODES, "declaring-node")
        assert node["status"].get("declaredFeatures") == ["ExtendWebSocketsToKubelet"], node["status"]
    finally:
        admin.delete(NODES, "declaring-node")
