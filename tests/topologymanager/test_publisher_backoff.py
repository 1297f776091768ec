"""The NodeResourceTopology publisher against an API server that refuses it (kube-apiserver with no such CRD,
or no RBAC for system:node:<name>): retried with a doubling back-off, warned about once per distinct error.
Before, an agent on kube-apiserver 1.37 warned every second (docs/interop.md)."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from agent.cm.topologymanager.publisher import RETRY_MAX_S, TopologyPublisher
from kubenode.kubeclient import Forbidden
from tests.topologymanager.test_device_alignment import ISSUE_37, SINGLE, Devices

if TYPE_CHECKING:
    from agent.cm.devicemanager import DeviceManager
    from kubenode.kubeclient import KubeClient

REFUSAL = (
    'noderesourcetopologies.topology.node.k8s.io "n" is forbidden: User "system:node:n" cannot get resource '
    '"noderesourcetopologies" in API group "topology.node.k8s.io" at the cluster scope'
)


class RefusingClient:
    def __init__(self) -> None:
        self.calls = 0

    def get(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        raise Forbidden(403, "Forbidden", REFUSAL)


def test_a_refused_topology_is_retried_with_backoff_and_warned_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "devices/system/node/node0").mkdir(parents=True)
    (tmp_path / "devices/system/node/node0/distance").write_text("10\n")
    now = [100.0]
    client = RefusingClient()
    publisher = TopologyPublisher(
        cast("KubeClient", client), "n", cast("DeviceManager", Devices(ISSUE_37)), SINGLE, "container",
        str(tmp_path), interval=1.0, clock=lambda: now[0],
    )  # fmt: skip
    caplog.set_level(logging.DEBUG, logger="agent.cm.topologymanager.publisher")
    tries = []
    for _ in range(600):  # ten minutes of one-second rounds
        before = client.calls
        publisher.publish_once()
        if client.calls > before:
            tries.append(now[0])
        now[0] += 1.0
    gaps = [b - a for a, b in itertools.pairwise(tries)]
    assert gaps[:5] == [1.0, 2.0, 4.0, 8.0, 16.0], gaps
    assert max(gaps) <= RETRY_MAX_S and len(tries) < 15, tries
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "forbidden" in warnings[0].getMessage(), warnings
