"""The agent's status port is no Kubernetes component's default, and the code, manifests and docs all use
the one constant (10256, used before, is kube-proxy's health port: the hostNetwork DaemonSet crash-looped)."""

from __future__ import annotations

from pathlib import Path

import yaml

from agent.apis.config import AgentConfig, parse_listen
from kubenode.ports import AGENT_STATUS_PORT

ROOT = Path(__file__).resolve().parent.parent
# Defaults of kube-apiserver, etcd, kubelet (API, healthz, read-only), kube-proxy (metrics, health),
# kube-controller-manager, cloud-controller-manager and kube-scheduler.
KUBERNETES_PORTS = {6443, 2379, 2380, 10248, 10249, 10250, 10255, 10256, 10257, 10258, 10259}


def test_the_default_is_clear_of_kubernetes() -> None:
    assert AGENT_STATUS_PORT not in KUBERNETES_PORTS and not 30000 <= AGENT_STATUS_PORT <= 32767
    assert parse_listen(AgentConfig().listen) == ("127.0.0.1", AGENT_STATUS_PORT)


def test_manifests_and_docs_use_the_constant() -> None:
    config_map, daemon_set = yaml.safe_load_all((ROOT / "deploy/agent-daemonset.yaml").read_text())
    assert parse_listen(yaml.safe_load(config_map["data"]["agent.yaml"])["listen"])[1] == AGENT_STATUS_PORT
    [container] = daemon_set["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"]["httpGet"]["port"] == AGENT_STATUS_PORT
    for doc in ("docs/agent.md", "docs/deploy.md"):
        assert f"127.0.0.1:{AGENT_STATUS_PORT}" in (ROOT / doc).read_text(), doc
    for path in [
        *ROOT.glob("docs/*.md"),
        ROOT / "README.md",
        *ROOT.glob("deploy/*.yaml"),
        *ROOT.glob("systemd/*"),
    ]:
        text = path.read_text()
        assert "127.0.0.1:10256" not in text and "port: 10256" not in text, path
