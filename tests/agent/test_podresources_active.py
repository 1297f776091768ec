"""The running agent tells its device manager its active pods, so PodResources lists pods without devices."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import grpc

from agent.cm.devicemanager import DeviceManager
from agent.daemon import active_pod_infos
from harness.manifests import write_manifest
from kubenode.api.podresources.v1 import api_pb2, api_pb2_grpc
from tests.agent.support import Harness, pod_manifest, wait_until


def listed(socket_path: Path) -> list[tuple[str, list[tuple[str, int]]]]:
    with grpc.insecure_channel(f"unix://{socket_path}") as channel:
        stub = api_pb2_grpc.PodResourcesListerStub(channel)
        response = stub.List(api_pb2.ListPodResourcesRequest(), timeout=5)
    return [(p.name, [(c.name, len(c.devices)) for c in p.containers]) for p in response.pod_resources]


def test_pod_without_devices_is_listed_while_active(
    make_harness: Callable[..., Harness], manifests: Path, short_dir: Path, tmp_path: Path
) -> None:
    socket_path = short_dir / "pod-resources.sock"
    devices = DeviceManager(short_dir, tmp_path / "devices", podresources_socket=socket_path)
    h = make_harness(devices=devices)
    devices.start(functools.partial(active_pod_infos, h.agent))
    try:
        h.start()
        path = write_manifest(manifests, "plain.yaml", pod_manifest("plain"))
        h.wait_phase("plain", "Running")
        assert listed(socket_path) == [("plain", [("main", 0)])]
        path.unlink()
        wait_until(lambda: listed(socket_path) == [], 10, "the removed pod to leave PodResources")
        h.stop()
    finally:
        devices.stop()
