"""The authenticated endpoint's serving certificate is asked for off the agent's start: a kubelet-serving
CSR that nobody approves (kube-apiserver's controller manager approves none) must not hold the agent up.
Under kube-apiserver 1.37 without an approver the agent registered its Node and started its pods only after
the 60 s wait (docs/interop.md). No server here: the client takes the CSR and never approves it."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import yaml

from agent.apis.config import AgentConfig
from agent.node import NodeAgent
from agent.server import secure
from agent.server.secure import build_secure_server


class NeverApproves:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.polls = 0

    def create(self, resource: Any, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        self.created.append(body)
        return {**body, "metadata": {"name": "csr-pending"}, "status": {}}

    def get(self, resource: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.polls += 1
        return {"metadata": {"name": name}, "status": {}}


def test_an_unapproved_serving_csr_does_not_hold_the_agent_up(tmp_path: Path, monkeypatch: Any) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("not read before a certificate comes\n")
    kubeconfig = tmp_path / "node.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c",
                      "cluster": {"server": "https://127.0.0.1:1", "certificate-authority": str(ca)}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))  # fmt: skip
    monkeypatch.setattr(secure, "SERVING_CERT_WAIT_S", 30.0)
    config = AgentConfig(
        node_name="pending-node", state_dir=tmp_path / "state", manifests=tmp_path / "m",
        kubeconfig=kubeconfig, listen="127.0.0.1:0",
    )  # fmt: skip
    client = NeverApproves()
    started = time.monotonic()
    agent = cast("NodeAgent", SimpleNamespace(status_json=dict))  # read only by the endpoint once built
    server = build_secure_server(config, agent, client, "127.0.0.1")
    assert server is not None and time.monotonic() - started < 5, "building the endpoint waited for the CSR"
    assert int(server.address.rsplit(":", 1)[1]) > 0  # bound: the Node can name its port at once
    server.start()
    deadline = time.monotonic() + 20
    while not client.polls and time.monotonic() < deadline:  # the CSR is posted and polled meanwhile
        time.sleep(0.05)
    assert client.created and client.created[0]["spec"]["signerName"] == "kubernetes.io/kubelet-serving"
    assert client.polls and not server.built
    stopping = time.monotonic()
    server.stop()  # does not wait out the approval
    assert time.monotonic() - stopping < 5
