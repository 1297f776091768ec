"""`kubenode deviceplugin` as a process: discover, config errors, env kubelet dir, READY=1, clean exit."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from harness.threadsignal import tgkill, thread_taking
from tests.deviceplugin.conftest import Kubelet
from tests.deviceplugin.support import CONFIGS, wait_until

KUBENODE = [sys.executable, "-m", "cli.main"]


def test_discover_json_lists_devices() -> None:
    out = subprocess.run(
        [*KUBENODE, "deviceplugin", "discover", "--config", str(CONFIGS / "static.yaml"), "--json"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    resources = {r["name"]: r for r in json.loads(out)["resources"]}
    assert [(d["id"], d["health"], d["numa"]) for d in resources["example.com/dongle"]["devices"]] == [
        ("dongle-0", "Healthy", [0]),
        ("dongle-1", "Healthy", [1]),
    ]
    assert len(resources["example.com/accel"]["devices"]) == 4
    assert resources["example.com/accel"]["replicas"] == 2


def test_discover_table_for_the_cpu_backend() -> None:
    out = subprocess.run(
        [*KUBENODE, "deviceplugin", "discover", "--config", str(CONFIGS / "cpu.yaml")],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert out.splitlines()[0].split() == ["RESOURCE", "BACKEND", "DEVICE", "HEALTH", "NUMA"]
    assert "kubenode.io/cpu  cpu      cpu0" in out


def test_bad_config_fails_at_start_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "config.yaml"
    bad.write_text(
        "resources:\n"
        "  - {name: example.com/a, backend: static, static: {devices: [{id: a}]}}\n"
        "  - {name: gpu, backend: gpu}\n"
    )
    result = subprocess.run(
        [*KUBENODE, "deviceplugin", "--config", str(bad), "--kubelet-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "config.yaml: resources[1].name:" in result.stderr


def test_serves_with_env_dir_notifies_ready_and_exits_cleanly(kubelet_dir: Path, kubelet: Kubelet) -> None:
    notify_path = kubelet_dir / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(str(notify_path))
        notify.settimeout(10)
        env = {**os.environ, "KUBENODE_KUBELET_DIR": str(kubelet_dir), "NOTIFY_SOCKET": str(notify_path)}
        process = subprocess.Popen(
            [*KUBENODE, "deviceplugin", "--config", str(CONFIGS / "static.yaml")],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert kubelet.manager.wait_for_resource("example.com/dongle", 10)
            assert kubelet.manager.wait_for_resource("example.com/accel", 10)
            message = notify.recv(4096).decode()
            assert "READY=1" in message.splitlines()
        finally:
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=10)
    assert process.returncode == 0, stderr
    assert sorted(p.name for p in kubelet_dir.glob("kubenode-*.sock")) == []
    assert wait_until(lambda: not any(r.connected for r in kubelet.manager.resources()))


def test_a_sigterm_taken_by_another_thread_stops_the_plugin_at_once(tmp_path: Path) -> None:
    # The kernel may hand a process's SIGTERM to a gRPC or health thread. With no kubelet to register with,
    # the main thread waits on its watch until the next reminder; it must still wake
    # (signal.set_wakeup_fd) and stop at once, not wait for a SIGKILL.
    env = {**os.environ, "KUBENODE_KUBELET_DIR": str(tmp_path)}
    process = subprocess.Popen(
        [*KUBENODE, "deviceplugin", "--config", str(CONFIGS / "static.yaml")],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(lambda: len(list(tmp_path.glob("kubenode-*.sock"))) == 2, 10), "not serving"
        tgkill(process.pid, thread_taking(process.pid, signal.SIGTERM), signal.SIGTERM)
        _, stderr = process.communicate(timeout=5)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    assert sorted(p.name for p in tmp_path.glob("kubenode-*.sock")) == []
