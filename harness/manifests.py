"""A manifest-only agent's pieces for in-process runs: its fast config and atomic manifest writes."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

from agent.apis.config import AgentConfig


def write_manifest(directory: Path, name: str, text: str) -> Path:
    """Write atomically (hidden temp file, then rename) so the agent never reads half a file."""
    path = directory / name
    tmp = directory / f".{name}.tmp"
    tmp.write_text(textwrap.dedent(text))
    os.replace(tmp, path)
    return path


def fast_agent_config(
    root: str, manifests: Path, state_dir: Path, *, housekeeping_interval: float = 0.3
) -> AgentConfig:
    """A manifest-only agent (no device plugins, no status endpoint) with loops short enough for tests."""
    return AgentConfig(
        node_name="testnode",
        manifests=manifests,
        state_dir=state_dir,
        cgroup_root=root,
        device_plugin_dir=None,
        listen="",
        manifest_rescan_interval=1.0,
        housekeeping_interval=housekeeping_interval,
        relist_interval=0.1,
    )
