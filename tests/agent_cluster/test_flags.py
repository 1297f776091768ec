"""The cluster flags as a user meets them: one line and exit 2 for a bad kubeconfig or flag, and a standalone
agent (no --kubeconfig) that never loads the client layer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent.apis.clusterflags import parse_node_labels, parse_reserved, parse_taints, taint_json
from kubenode.model import ValidationError
from tests.importprobe import modules_loaded

REPO = Path(__file__).resolve().parents[2]


def _agent(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "cli.main", "agent", "--state-dir", str(tmp_path / "state")]
    argv += ["--manifests", str(tmp_path / "m"), "--listen", "", "--device-plugin-dir", "none"]
    argv += ["--cgroup-root", "/kn-flags-never-made", *flags]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=REPO)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (("--kubeconfig", "/nonexistent/kubeconfig"), "--kubeconfig: /nonexistent/kubeconfig: no such file"),
        (("--register-with-taints", "a=b:Sometimes"), "--register-with-taints: 'a=b:Sometimes' must be"),
        (("--system-reserved", "cpu=lots"), "--system-reserved: cpu=lots:"),
        (("--node-labels", "novalue"), "--node-labels: 'novalue' is not key=value"),
        (("--in-cluster",), "--in-cluster: no kubeconfig given and not running in a cluster"),
    ],
)
def test_bad_cluster_flag_is_one_line_and_exit_2(
    tmp_path: Path, flags: tuple[str, ...], expected: str
) -> None:
    result = _agent(tmp_path, *flags)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], result.stderr


def test_unreadable_kubeconfig_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\n")
    result = _agent(tmp_path, "--kubeconfig", str(bad))
    assert result.returncode == 2
    message = (
        f"{bad}: cannot load kubeconfig: Invalid kube-config file. Expected key current-context in {bad}"
    )
    assert result.stderr.strip() == f"kubenode agent: {message}"


def test_standalone_agent_does_not_load_the_client_layer(tmp_path: Path) -> None:
    code = (
        "from agent.apis.config import AgentConfig\n"
        "from agent.daemon import build_agent\n"
        f"config = AgentConfig(state_dir={str(tmp_path)!r}, manifests={str(tmp_path / 'm')!r},"
        " cgroup_root='/kn-flags-never-made', device_plugin_dir=None, listen='')\n"
        "build_agent(config)\n"
    )
    client = ["kubenode.kubeclient", "urllib3", "agent.nodestatus.cluster"]
    assert modules_loaded(code, client) == ([], [])


def test_flag_parsers() -> None:
    assert parse_node_labels("a=b, example.com/x=y") == {"a": "b", "example.com/x": "y"}
    assert parse_taints("k=v:NoSchedule,gpu:NoExecute") == ["k=v:NoSchedule", "gpu:NoExecute"]
    assert taint_json("k=v:NoSchedule") == {"key": "k", "value": "v", "effect": "NoSchedule"}
    assert taint_json("gpu:NoExecute") == {"key": "gpu", "effect": "NoExecute"}
    assert parse_reserved("cpu=500m,memory=1Gi") == {"cpu": 500, "memory": 2**30}
    with pytest.raises(ValidationError, match=r"node-restriction\.kubernetes\.io/"):
        parse_node_labels("node-restriction.kubernetes.io/x=y")
    # The kubelet's --node-labels rule: in kubernetes.io and k8s.io only its own set and prefixes. Under
    # kube-apiserver's NodeRestriction an agent with node-role.kubernetes.io/worker retried its 403 Node
    # registration forever (docs/interop.md).
    for refused in ("node-role.kubernetes.io/worker=", "example.k8s.io/x=y", "kubernetes.io/role=x"):
        with pytest.raises(ValidationError, match="NodeRestriction refuses"):
            parse_node_labels(refused)
    allowed = (
        "node.kubernetes.io/pool=a,kubelet.kubernetes.io/x=1,topology.kubernetes.io/zone=z,example.com/y=2"
    )
    assert len(parse_node_labels(allowed)) == 4
