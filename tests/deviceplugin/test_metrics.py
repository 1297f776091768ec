"""`kubenode deviceplugin --metrics-bind-address`: the real process, scraped over HTTP while the real device
manager (the kubelet side) registers it, allocates and holds its ListAndWatch streams."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import grpc
from prometheus_client.parser import text_string_to_metric_families

from kubenode.api.deviceplugin.v1beta1 import api_pb2
from tests.deviceplugin.conftest import Kubelet
from tests.deviceplugin.support import CONFIGS, plugin_client, wait_until

KUBENODE = [sys.executable, "-m", "cli.main"]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _samples(base: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text = _get(f"{base}/metrics")
    assert status == 200, text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(base: str, name: str, **labels: str) -> float | None:
    return _samples(base).get((name, tuple(sorted(labels.items()))))


def test_metrics_and_health_follow_registration_allocation_and_streams(
    kubelet_dir: Path, kubelet: Kubelet
) -> None:
    process = subprocess.Popen(
        [
            *KUBENODE,
            "deviceplugin",
            "--config",
            str(CONFIGS / "static.yaml"),
            "--kubelet-dir",
            str(kubelet_dir),
            "--metrics-bind-address",
            "127.0.0.1:0",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr or ()), daemon=True)
    reader.start()
    try:
        assert wait_until(lambda: any("on port" in line for line in lines), 10), lines
        port = int(re.search(r"on port (\d+)", next(x for x in lines if "on port" in x)).group(1))  # type: ignore[union-attr]
        base = f"http://127.0.0.1:{port}"
        assert kubelet.manager.wait_for_resource("example.com/dongle", 10)
        assert kubelet.manager.wait_for_resource("example.com/accel", 10)
        assert wait_until(lambda: _get(f"{base}/readyz")[0] == 200, 10), _get(f"{base}/readyz")
        assert _get(f"{base}/healthz") == (200, "ok")

        resource = {"resource": "example.com/dongle"}
        assert _value(base, "kubenode_deviceplugin_devices", health="Healthy", **resource) == 2
        assert _value(base, "kubenode_deviceplugin_devices", health="Unhealthy", **resource) == 0
        assert (
            _value(base, "kubenode_deviceplugin_devices", health="Healthy", resource="example.com/accel") == 4
        )
        registered = {"result": "success", **resource}
        assert _value(base, "kubenode_deviceplugin_registrations_total", **registered) == 1
        # The device manager holds one ListAndWatch stream per resource.
        assert wait_until(lambda: _value(base, "kubenode_deviceplugin_listandwatch_streams", **resource) == 1)

        # Health flips are visible at the next scrape (the gauge is read from the device state).
        (kubelet_dir / "static-health").write_text("dongle-1\n")
        assert wait_until(
            lambda: _value(base, "kubenode_deviceplugin_devices", health="Unhealthy", **resource) == 1, 10
        )

        with plugin_client(kubelet_dir / "kubenode-example.com-dongle.sock") as stub:
            stream = stub.ListAndWatch(api_pb2.Empty())
            next(stream)
            assert wait_until(
                lambda: _value(base, "kubenode_deviceplugin_listandwatch_streams", **resource) == 2
            )
            stub.Allocate(
                api_pb2.AllocateRequest(
                    container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=["dongle-0"])]
                )
            )
            try:
                stub.Allocate(
                    api_pb2.AllocateRequest(
                        container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=["no-such"])]
                    )
                )
                raise AssertionError("an unknown device was allocated")
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
            stream.cancel()
        assert wait_until(lambda: _value(base, "kubenode_deviceplugin_listandwatch_streams", **resource) == 1)
        samples = _samples(base)
        labels = tuple(sorted(resource.items()))
        assert (
            samples[
                (
                    "kubenode_deviceplugin_allocations_total",
                    (("resource", "example.com/dongle"), ("result", "success")),
                )
            ]
            == 1
        )
        assert (
            samples[
                (
                    "kubenode_deviceplugin_allocations_total",
                    (("resource", "example.com/dongle"), ("result", "error")),
                )
            ]
            == 1
        )
        assert samples[("kubenode_deviceplugin_allocation_duration_seconds_count", labels)] == 2
        assert _get(f"{base}/nothing")[0] == 404

        # The kubelet goes away: still alive, no longer ready, naming the resources.
        kubelet.stop()
        assert wait_until(lambda: _get(f"{base}/readyz")[0] == 500, 10)
        assert "example.com/dongle" in _get(f"{base}/readyz")[1]
        assert _get(f"{base}/healthz")[0] == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)
        reader.join(5)
    assert process.returncode == 0, "".join(lines)


def test_a_bad_metrics_address_is_a_usage_error(kubelet_dir: Path) -> None:
    result = subprocess.run(
        [
            *KUBENODE,
            "deviceplugin",
            "--backend",
            "static",
            "--kubelet-dir",
            str(kubelet_dir),
            "--metrics-bind-address",
            "localhost",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("kubenode deviceplugin: --metrics-bind-address: expected host:port")
    )


def test_without_the_flag_prometheus_is_not_loaded() -> None:
    code = (
        "import sys, deviceplugin.cli, deviceplugin.manager, deviceplugin.service, deviceplugin.endpoint\n"
        "lazy = ('prometheus_client', 'http.server', 'kubenode.metricshttp')\n"
        "print(sorted(m for m in sys.modules if m.startswith(lazy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]", out
