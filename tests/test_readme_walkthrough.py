"""The README's agent walkthrough starts a plugin on the agent's own plugin directory, and that plugin
provides every extended resource the example pods ask for (else those pods fail after 30 s)."""

from __future__ import annotations

from pathlib import Path

import yaml

from agent.apis.config import AgentConfig
from deviceplugin.config import load_config
from kubenode.model.resources import is_extended_resource_name

ROOT = Path(__file__).resolve().parent.parent


def test_walkthrough_plugin_covers_the_example_pods() -> None:
    readme = (ROOT / "README.md").read_text()
    plugin_dir = AgentConfig().device_plugin_dir
    plugin_line = next(
        line for line in readme.splitlines() if "kubenode deviceplugin --config examples/" in line
    )
    assert f"--kubelet-dir {plugin_dir}" in plugin_line
    config_path = plugin_line.split("--config ", 1)[1].split()[0]
    offered = {r.name for r in load_config(str(ROOT / config_path)).resources}
    wanted = set()
    for path in sorted((ROOT / "examples/pods").glob("*.yaml")):
        pods = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "Pod"]
        for container in [c for pod in pods for c in pod["spec"]["containers"]]:
            limits = container.get("resources", {}).get("limits", {})
            wanted |= {name for name in limits if is_extended_resource_name(name)}
    assert wanted and wanted <= offered, (wanted, offered)
    assert "kubenode agent drain" in readme
