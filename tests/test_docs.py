"""The docs say what a new user needs and stay in step with the code (issue 12 items 13 and 14)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from agent.apis.config import DEFAULT_DEVICE_PLUGIN_DIR, AgentConfig
from kubenode.deviceapi import DEFAULT_KUBELET_DIR

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = (ROOT / "docs/deploy.md").read_text()


def test_deploy_doc_says_who_registers_where_and_where_pods_and_pinning_hold() -> None:
    assert "registers with **the kubelet, not with the kubenode agent**" in DEPLOY
    assert "pods run **in the host's filesystem**" in DEPLOY
    assert "holds **under the kubenode agent**" in DEPLOY and "CDI route" in DEPLOY
    assert f"`{DEFAULT_KUBELET_DIR}`" in DEPLOY and f"`{DEFAULT_DEVICE_PLUGIN_DIR}`" in DEPLOY
    # The facts behind the first statement: the DaemonSet mounts the kubelet's dir, the agent uses its own.
    [daemon_set] = [
        d
        for d in yaml.safe_load_all((ROOT / "deploy/deviceplugin-daemonset.yaml").read_text())
        if d["kind"] == "DaemonSet"
    ]
    volumes = daemon_set["spec"]["template"]["spec"]["volumes"]
    assert any(v.get("hostPath", {}).get("path") == DEFAULT_KUBELET_DIR for v in volumes)
    assert AgentConfig().device_plugin_dir != Path(DEFAULT_KUBELET_DIR)
    assert "docs/deploy.md" in (ROOT / "README.md").read_text()


def test_agent_settings_table_lists_the_manifest_mode_settings() -> None:
    agent_doc = (ROOT / "docs/agent.md").read_text()
    table = agent_doc.split("| flag | config key", 1)[1].split("\n\n", 1)[0]
    for key in ("maxPods", "devicePluginWait", "resyncInterval", "manifestRescanInterval"):
        assert f"`{key}`" in table
    config = AgentConfig()
    assert "`housekeepingInterval` (" in table and f"| {config.housekeeping_interval:g} s |" in table
    assert "`relistInterval` (" in table and f"| {config.relist_interval:g} s |" in table


def test_command_examples_use_the_venv_path() -> None:
    """After `make`, kubenode is .venv/bin/kubenode; a bare `kubenode` in a shell example is not on PATH."""
    for doc in ("docs/conformance.md", "README.md"):
        for block in re.findall(r"```(?:sh|)\n(.*?)```", (ROOT / doc).read_text(), re.DOTALL):
            for line in block.splitlines():
                command = line.lstrip("$ ").split("#", 1)[0]
                assert not re.match(r"kubenode\s", command), f"{doc}: {line!r}"


def test_scheduler_doc_example_error_is_what_simulate_prints(tmp_path: Path) -> None:
    doc = (ROOT / "docs/scheduler.md").read_text()
    [example] = [line for line in doc.splitlines() if line.startswith("invalid pod: mixed.json")]
    items = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "4"}},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "two"}}}]},
        },
    ]
    (tmp_path / "mixed.json").write_text(json.dumps({"kind": "List", "items": items}))
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", "scheduler", "simulate", "--cluster", "mixed.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert example in out


def test_one_table_of_figures_linked_from_the_readme_and_docs() -> None:
    for doc in ("README.md", "docs/deviceplugin.md", "docs/agent.md", "docs/scheduler.md"):
        text = (ROOT / doc).read_text()
        assert "figures.md" in text, f"{doc} does not link the figures"
        assert "| measured |" not in text and "| value |" not in text, f"{doc} keeps its own copy of figures"
    figures = (ROOT / "docs/figures.md").read_text()
    assert "Made by `make bench`" in figures
    for figure in ("Allocate round trip p99", "agent RSS with 110 running pods", "pods/s"):
        assert figure in figures


def test_figures_tool_renders_what_the_benchmarks_recorded(tmp_path: Path) -> None:
    recorded = tmp_path / "figures.jsonl"
    rows = [
        {"bench": "agent_bench", "name": "agent RSS", "value": 50.25, "unit": "MiB", "goal": "<= 80 MiB"},
        {"bench": "scheduler_bench", "name": "throughput", "value": 3456.7, "unit": "pods/s", "goal": ""},
    ]
    recorded.write_text("".join(json.dumps(r) + "\n" for r in rows))
    target = tmp_path / "figures.md"
    subprocess.run([sys.executable, "tools/figures.py", str(recorded), str(target)], cwd=ROOT, check=True)
    table = target.read_text().splitlines()
    assert "| node agent | agent RSS | 50.2 MiB | <= 80 MiB |" in table
    assert "| scheduler | throughput | 3,457 pods/s |  |" in table
