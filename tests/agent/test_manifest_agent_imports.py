"""The manifest-only agent stays small (issue 12 item 16): running pods from manifests imports neither the
kubernetes client (with pydantic and urllib3) nor aiohttp, which only the cluster mode needs."""

from __future__ import annotations

import textwrap
from pathlib import Path

from harness.manifests import write_manifest
from tests.agent.support import cgroup_dirs, pod_manifest
from tests.importprobe import modules_loaded

ROOT = Path(__file__).resolve().parents[2]


def test_manifest_mode_does_not_import_the_cluster_libraries(
    cgroup_root: str, manifests: Path, short_dir: Path, tmp_path: Path
) -> None:
    write_manifest(
        manifests, "web.yaml", pod_manifest("web", resources="{limits: {cpu: 100m, memory: 32Mi}}")
    )
    code = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from agent.apis.config import AgentConfig
        from agent.daemon import build_agent

        config = AgentConfig(
            node_name="imports",
            manifests=Path({str(manifests)!r}),
            state_dir=Path({str(tmp_path / "state")!r}),
            cgroup_root={cgroup_root!r},
            device_plugin_dir=Path({str(short_dir)!r}),
            listen="127.0.0.1:0",
        )
        running = build_agent(config)
        running.start()
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                items = running.agent.status_json()["items"]
                if items and items[0]["status"]["phase"] == "Running":
                    break
                time.sleep(0.05)
            print(items[0]["status"]["phase"])
        finally:
            running.stop(terminate_pods=True)
        """
    )
    printed, loaded = modules_loaded(code, ["kubernetes", "pydantic", "urllib3", "aiohttp"])
    assert printed == ["Running"] and loaded == []
    assert not cgroup_dirs(cgroup_root)
