"""`kubenode agent status` over the local endpoint, and `kubenode up --once` end to end."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.apis.config import AgentConfig
from agent.cm.cgroups import make_pod_cgroups
from agent.composition import compose_node
from agent.config.sources import SourceSnapshot
from agent.daemon import RunningAgent
from agent.server.httpapi import StatusServer
from agent.volumemanager.mountutil import mounts_under
from cli.main import main
from harness.manifests import write_manifest
from tests.agent.support import Harness, cgroup_dirs, pod_manifest, require_cgroup_v1, sweep

REPO = Path(__file__).resolve().parents[2]


def test_status_table_and_json(
    make_harness: Callable[..., Harness], manifests: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_manifest(
        manifests, "web.yaml", pod_manifest("web", resources="{limits: {cpu: 250m, memory: 32Mi}}")
    )
    write_manifest(manifests, "bad.yaml", pod_manifest("bad", resources="{limits: {memory: lots}}"))
    h = make_harness().start()
    web = h.wait_phase("web", "Running")
    server = StatusServer("127.0.0.1", 0, h.agent.status_json)
    server.start()
    try:
        with urllib.request.urlopen(f"http://{server.address}/healthz", timeout=5) as r:
            assert r.read() == b"ok"
        with urllib.request.urlopen(f"http://{server.address}/pods", timeout=5) as r:
            document = json.loads(r.read())
        assert [i["metadata"]["uid"] for i in document["items"]] == [web["metadata"]["uid"]]
        assert main(["agent", "status", "--listen", server.address]) == 0
    finally:
        server.stop()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "POD",
        "QOS",
        "STATUS",
        "CGROUP",
        "CPU",
        "QUOTA",
        "CPUSET",
        "DEVICES",
        "RESTARTS",
    ]
    row = lines[1].split()
    assert row[:3] == ["default/web", "Guaranteed", "Running"]
    assert row[3] == web["kubenode"]["cgroup"]
    assert row[4] == "25000/100000"
    assert row[-1] == "0"
    assert any(
        line.startswith("manifest error:") and "bad.yaml" in line and "limits.memory" in line
        for line in lines
    )


def test_status_without_an_agent_says_where_it_looked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "status", "--listen", "127.0.0.1:9"]) == 1
    assert "cannot reach the agent at http://127.0.0.1:9/pods" in capsys.readouterr().err


def test_kubenode_up_once_shows_pods_cgroups_and_limits() -> None:
    """The one-machine cluster (cli/up): every example pod scheduled, Running, and given what it asked."""
    require_cgroup_v1()
    root = f"/kn-agent-up-{uuid.uuid4().hex[:8]}"
    data = tempfile.mkdtemp(prefix="kn-agent-up-", dir="/tmp")  # short: plugin socket paths go under it
    try:
        result = subprocess.run(
            [sys.executable, "-m", "cli.main", "up", "--once", "--port", "0",
             "--data-dir", data, "--cgroup-root", root],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=90,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
        lines = result.stdout.splitlines()
        rows = {line.split()[1]: line.split() for line in lines if line.startswith("default ")}
        for name in ("web", "worker", "idle", "pinned", "gpu-job", "greeter"):
            assert rows[name][3] == "Running", result.stdout
        assert "main:gpu=demo-gpu-0" in rows["gpu-job"]
        assert rows["web"][4:] == ["Guaranteed", "-", rows["web"][6], "25000/100000", "67108864"], rows["web"]
        assert "6/6 pods got what they asked for" in result.stdout
        assert "configmap/greeter created" in result.stdout
        assert not cgroup_dirs(root), "kubenode up left cgroups behind"
        assert not mounts_under(Path(data)), "kubenode up left the pods' volumes mounted"
    finally:
        sweep(root)
        shutil.rmtree(data, ignore_errors=True)


class BrokenSource:
    name = "broken"

    def start(self, on_change: Callable[[SourceSnapshot], None]) -> None:
        raise OSError("manifest directory unreadable")

    def stop(self) -> None:
        pass


def test_a_failed_start_is_undone_by_stop(cgroup_root: str, tmp_path: Path) -> None:
    """`kubenode up` stops what failed half-way: the cgroup root made before the failure goes too."""
    config = AgentConfig(state_dir=tmp_path / "state", cgroup_root=cgroup_root, device_plugin_dir=None)
    cgroups = make_pod_cgroups(cgroup_root)
    running = RunningAgent(config, compose_node(config, cgroups, [BrokenSource()]), None)
    with pytest.raises(OSError, match="unreadable"):
        running.start()
    assert cgroup_dirs(cgroup_root), "the agent made its cgroups before the source failed"
    running.stop(terminate_pods=True)
    assert not cgroup_dirs(cgroup_root), "stop left the half-started agent's cgroups behind"
