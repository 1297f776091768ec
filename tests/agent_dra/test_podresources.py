"""PodResources List lists a container's prepared claims (claim, driver, pool, device, CDI IDs) as the
kubelet's does, from the DRA manager, beside the device plugins' devices."""

from __future__ import annotations

from pathlib import Path

import grpc

from agent.cm.devicemanager import DeviceManager, PodInfo
from agent.cm.dra.podresources import dynamic_lookup
from deviceplugin.dra.driver import Driver
from kubenode.api.podresources.v1 import api_pb2, api_pb2_grpc
from tests.agent_dra.conftest import Claims, claim_pod
from tests.agent_dra.test_manager import manager_for


def test_list_shows_dynamic_resources(driver: Driver, claims: Claims, dirs: Path) -> None:
    claims.add("cpus", "uid-1", ["cpu-1"])
    dra = manager_for(driver, claims, dirs / "state")
    dra.prepare(claim_pod())
    socket_path = dirs / "pod-resources.sock"
    devices = DeviceManager(
        dirs / "dp", dirs / "devices", podresources_socket=socket_path, dynamic_resources=dynamic_lookup(dra)
    )
    devices.start(lambda: [PodInfo("pod-1", "default", "p", ("main", "side"))])
    try:
        with grpc.insecure_channel(f"unix://{socket_path}") as channel:
            stub = api_pb2_grpc.PodResourcesListerStub(channel)
            [pod] = stub.List(api_pb2.ListPodResourcesRequest(), timeout=5).pod_resources
    finally:
        devices.stop()
    main, side = pod.containers
    assert list(side.dynamic_resources) == []
    [claim] = main.dynamic_resources
    assert (claim.claim_name, claim.claim_namespace) == ("cpus", "default")
    [resource] = claim.claim_resources
    assert (resource.driver_name, resource.pool_name, resource.device_name) == (
        "cpu.kubenode.io",
        "node-a",
        "cpu-1",
    )
    assert [c.name for c in resource.cdi_devices] == ["cpu.kubenode.io/claim=uid-1-cpu-1"]
