"""kubenode's DRA driver over its real sockets: registration, prepare/unprepare in v1 and v1beta1, the CDI
specs it writes (read back with kubenode's CDI reader), idempotence, a restart, errors per claim. The
claims it reads are ResourceClaims in a real `kubenode apiserver` (resource.k8s.io/v1)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import grpc
import pytest

from deviceplugin.dra.driver import Driver, DriverOptions, discover, load_options
from deviceplugin.dra.inventory import CPU_DRIVER, GPU_DRIVER, semver
from kubenode.api.dra.v1 import api_pb2 as v1
from kubenode.api.dra.v1 import api_pb2_grpc as v1_grpc
from kubenode.api.dra.v1beta1 import api_pb2 as v1beta1
from kubenode.api.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from kubenode.api.pluginregistration.v1 import api_pb2 as reg
from kubenode.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from kubenode.cdi.spec import read_spec
from kubenode.kubeclient import RESOURCE_CLAIMS, KubeClient

GPUS = [
    {
        "uuid": "GPU-aaaa",
        "productName": "NVIDIA A100-SXM4-80GB",
        "architecture": "Ampere",
        "cudaComputeCapability": "8.0",
        "driverVersion": "550.54.15",
        "pciBusID": "00000000:3B:00.0",
        "numaNode": 0,
        "memory": "80Gi",
    }
]


class Claims:
    """The driver's claim reads go to a real `kubenode apiserver`. `put` creates a claim and writes its
    allocation into its status (the scheduler's part), answering the UID the server gave it; `reads`
    counts the driver's reads; `delete_all` removes what `put` made."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.reads = 0
        self.made: list[str] = []

    def put(self, name: str, results: list[dict[str, str]]) -> str:
        body = {"metadata": {"name": name}, "spec": {"devices": {"requests": []}}}
        made = self.client.create(RESOURCE_CLAIMS, body, "default")
        self.made.append(name)
        made["status"] = {"allocation": {"devices": {"results": results}}}
        self.client.update(RESOURCE_CLAIMS, made, subresource="status")
        return str(made["metadata"]["uid"])

    def get(self, namespace: str, name: str) -> Mapping[str, Any]:
        self.reads += 1
        claim: Mapping[str, Any] = self.client.get(RESOURCE_CLAIMS, name, namespace)
        return claim

    def delete_all(self) -> None:
        for name in self.made:
            self.client.delete(RESOURCE_CLAIMS, name, "default")


def result(device: str, request: str = "r", driver: str = CPU_DRIVER, pool: str = "node-a") -> dict[str, str]:
    return {"request": request, "driver": driver, "pool": pool, "device": device}


@pytest.fixture
def options(fake_sysfs: Path, short_dir: Path) -> DriverOptions:
    return DriverOptions(
        node_name="node-a",
        registry_dir=short_dir / "registry",
        plugin_dir=short_dir / "plugins",
        cdi_dir=short_dir / "cdi",
        gpus=GPUS,
        sysfs_root=str(fake_sysfs),
        dev_root=str(short_dir / "dev"),
        cdi_hook_path="/usr/bin/kubenode",
    )


@pytest.fixture
def claims(kube: KubeClient) -> Iterator[Claims]:
    made = Claims(kube)
    yield made
    made.delete_all()


@pytest.fixture
def cpu_driver(options: DriverOptions, claims: Claims) -> Iterator[Driver]:
    devices = discover(options)[CPU_DRIVER]
    driver = Driver(CPU_DRIVER, devices, options, claims.get)
    driver.serve()
    yield driver
    driver.stop()


def test_cpu_devices_carry_topology(options: DriverOptions) -> None:
    found = discover(options)
    assert set(found) == {CPU_DRIVER, GPU_DRIVER}
    cpu5 = next(d for d in found[CPU_DRIVER] if d.name == "cpu-5")
    assert cpu5.slice_entry()["attributes"] == {
        "numaNode": {"int": 1},
        "socket": {"int": 1},
        "core": {"int": 5},
        "smtSibling": {"int": 7},
    }
    assert [d.name for d in found[CPU_DRIVER]] == [f"cpu-{n}" for n in range(8)]
    gpu = found[GPU_DRIVER][0].slice_entry()
    assert gpu["name"] == "gpu-0"
    assert gpu["attributes"]["cudaComputeCapability"] == {"version": "8.0.0"}
    assert gpu["attributes"]["driverVersion"] == {"version": "550.54.15"}
    assert gpu["attributes"]["uuid"] == {"string": "GPU-aaaa"}
    assert gpu["capacity"] == {"memory": {"value": "80Gi"}}
    assert semver("08.9") == "8.9.0"


def test_gpu_driver_only_where_gpus_are(options: DriverOptions) -> None:
    options.gpus = []
    assert set(discover(options)) == {CPU_DRIVER}
    options.drivers = (GPU_DRIVER,)
    assert set(discover(options)) == {GPU_DRIVER}


def test_registration_get_info(cpu_driver: Driver) -> None:
    with grpc.insecure_channel(f"unix://{cpu_driver.reg_socket}") as channel:
        stub = reg_grpc.RegistrationStub(channel)
        info = stub.GetInfo(reg.InfoRequest(), timeout=5)
        assert info.type == "DRAPlugin"
        assert info.name == CPU_DRIVER
        assert info.endpoint == str(cpu_driver.dra_socket)
        assert list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
        stub.NotifyRegistrationStatus(reg.RegistrationStatus(plugin_registered=True), timeout=5)
    assert cpu_driver.registration.registered.is_set()


@pytest.mark.parametrize("api", ["v1", "v1beta1"])
def test_prepare_writes_a_spec_and_unprepare_removes_it(cpu_driver: Driver, claims: Claims, api: str) -> None:
    uid = claims.put("two", [result("cpu-3", request="cpus")])
    mod, grpc_mod = (v1, v1_grpc) if api == "v1" else (v1beta1, v1beta1_grpc)
    with grpc.insecure_channel(f"unix://{cpu_driver.dra_socket}") as channel:
        stub = grpc_mod.DRAPluginStub(channel)
        request = mod.NodePrepareResourcesRequest(
            claims=[mod.Claim(namespace="default", uid=uid, name="two")]
        )
        answer = stub.NodePrepareResources(request, timeout=5).claims[uid]
        assert answer.error == ""
        [device] = answer.devices
        assert (list(device.request_names), device.pool_name, device.device_name) == (
            ["cpus"],
            "node-a",
            "cpu-3",
        )
        assert list(device.cdi_device_ids) == [f"cpu.kubenode.io/claim={uid}-cpu-3"]
        spec = read_spec(cpu_driver.state.specs.path(uid))
        assert spec.kind == "cpu.kubenode.io/claim"
        [entry] = spec.devices
        assert entry.name == f"{uid}-cpu-3"
        assert "KUBENODE_CPUSET=3" in entry.edits.env
        # Prepared again (a kubelet retry): the same answer, the claim not read again.
        again = stub.NodePrepareResources(request, timeout=5).claims[uid]
        assert list(again.devices[0].cdi_device_ids) == list(device.cdi_device_ids)
        assert claims.reads == 1
        unprepare = mod.NodeUnprepareResourcesRequest(
            claims=[mod.Claim(namespace="default", uid=uid, name="two")]
        )
        assert stub.NodeUnprepareResources(unprepare, timeout=5).claims[uid].error == ""
        assert not cpu_driver.state.specs.path(uid).exists()
        # Unknown now: still answered without error.
        assert stub.NodeUnprepareResources(unprepare, timeout=5).claims[uid].error == ""


def test_a_claim_of_two_cpus_names_both_in_each_devices_env(cpu_driver: Driver, claims: Claims) -> None:
    """Every CPU device of a request carries the request's whole set in KUBENODE_CPUSET (a runtime merges
    the env of a container's CDI devices, the last one winning: under kubelet 1.37 and containerd 2.4 a
    two-CPU claim's container saw only its last CPU); the hooks stay one per CPU (each pins to all of them,
    deviceplugin/cdihook.py). Another request of the same claim keeps its own set."""
    uid = claims.put(
        "pair",
        [result("cpu-1", request="cpus"), result("cpu-3", request="cpus"), result("cpu-2", request="one")],
    )
    with grpc.insecure_channel(f"unix://{cpu_driver.dra_socket}") as channel:
        request = v1.NodePrepareResourcesRequest(claims=[v1.Claim(namespace="default", uid=uid, name="pair")])
        answer = v1_grpc.DRAPluginStub(channel).NodePrepareResources(request, timeout=5).claims[uid]
    assert answer.error == ""
    entries = {
        e.name.removeprefix(f"{uid}-"): e.edits for e in read_spec(cpu_driver.state.specs.path(uid)).devices
    }
    assert {
        name: [v for v in edits.env if v.startswith("KUBENODE_CPUSET=")] for name, edits in entries.items()
    } == {
        "cpu-1": ["KUBENODE_CPUSET=1,3"],
        "cpu-3": ["KUBENODE_CPUSET=1,3"],
        "cpu-2": ["KUBENODE_CPUSET=2"],
    }
    assert [h.args[-1] for h in entries["cpu-3"].hooks] == ["3"]


def test_errors_are_per_claim(cpu_driver: Driver, claims: Claims) -> None:
    ok = claims.put("ok", [result("cpu-0")])
    stale = claims.put("stale", [result("cpu-1")])
    far = claims.put("far", [result("cpu-99")])
    other = claims.put("other", [result("d", driver="x.example.com", pool="p")])
    asked = [
        v1.Claim(namespace="default", uid=ok, name="ok"),
        v1.Claim(namespace="default", uid="uid-y", name="stale"),  # the claim was recreated meanwhile
        v1.Claim(namespace="default", uid=far, name="far"),
        v1.Claim(namespace="default", uid=other, name="other"),
        v1.Claim(namespace="default", uid="uid-gone", name="gone"),
    ]
    with grpc.insecure_channel(f"unix://{cpu_driver.dra_socket}") as channel:
        stub = v1_grpc.DRAPluginStub(channel)
        answers = stub.NodePrepareResources(v1.NodePrepareResourcesRequest(claims=asked), timeout=5).claims
    assert answers[ok].error == "" and len(answers[ok].devices) == 1
    assert f"has UID '{stale}', not 'uid-y'" in answers["uid-y"].error
    assert "no device ['cpu-99'] on this node" in answers[far].error
    assert "no device of cpu.kubenode.io allocated" in answers[other].error
    assert "not found" in answers["uid-gone"].error
    assert cpu_driver.state.specs.present() == [ok]


def test_a_restarted_driver_keeps_its_prepared_claims(options: DriverOptions, claims: Claims) -> None:
    devices = discover(options)[CPU_DRIVER]
    first = Driver(CPU_DRIVER, devices, options, claims.get)
    uid = claims.put("c", [result("cpu-6")])
    first.state.prepare("default", uid, "c")
    second = Driver(CPU_DRIVER, devices, options, claims.get)
    assert second.state.prepare("default", uid, "c") == first.state.prepare("default", uid, "c")
    assert claims.reads == 1
    second.state.unprepare(uid)
    assert Driver(CPU_DRIVER, devices, options, claims.get).state.prepared == {}


def test_gpu_claim_spec_names_the_gpu(options: DriverOptions, claims: Claims) -> None:
    devices = discover(options)[GPU_DRIVER]
    driver = Driver(GPU_DRIVER, devices, options, claims.get)
    uid = claims.put("g", [result("gpu-0", request="gpu", driver=GPU_DRIVER)])
    [device] = driver.state.prepare("default", uid, "g")
    assert device["cdi"] == [f"gpu.kubenode.io/claim={uid}-gpu-0"]
    [entry] = read_spec(driver.state.specs.path(uid)).devices
    assert "NVIDIA_VISIBLE_DEVICES=GPU-aaaa" in entry.edits.env
    assert entry.edits.device_nodes[0].path == "/dev/nvidia0"


def test_gpu_claim_spec_names_only_the_control_devices_that_exist(
    options: DriverOptions, claims: Claims
) -> None:
    """The GPU's control devices (nvidiactl, nvidia-uvm, nvidia-uvm-tools) are in a claim's spec only where
    they exist when it is prepared, as the device plugin's gpu backend answers them: containerd 2.4 fails a
    container whose CDI device names a missing host node ("CDI device injection failed: failed to stat CDI
    host device .../nvidiactl", found under the real kubelet); the GPU's own node is always named."""
    dev = Path(options.dev_root)
    dev.mkdir(parents=True, exist_ok=True)
    (dev / "nvidiactl").touch()  # a stand-in: only its existence is looked at
    devices = discover(options)[GPU_DRIVER]
    driver = Driver(GPU_DRIVER, devices, options, claims.get)
    uid = claims.put("g", [result("gpu-0", request="gpu", driver=GPU_DRIVER)])
    driver.state.prepare("default", uid, "g")
    [entry] = read_spec(driver.state.specs.path(uid)).devices
    assert [n.path for n in entry.edits.device_nodes] == ["/dev/nvidia0", "/dev/nvidiactl"]


def test_config_errors_name_the_field(tmp_path: Path, options: DriverOptions) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("drivers: [tpu.example.com]\n")
    with pytest.raises(ValueError, match=r"c.yaml: drivers: 'tpu.example.com'"):
        load_options(str(bad), options)
    bad.write_text("driver: [cpu.kubenode.io]\n")
    with pytest.raises(ValueError, match=r"unknown field 'driver'"):
        load_options(str(bad), options)


def test_registration_socket_comes_back_when_the_registry_is_recreated(options: DriverOptions) -> None:
    """The kubelet's plugin watcher re-registers a driver whose socket reappears (e.g. after the registry
    directory was wiped); the driver puts its socket back."""
    import shutil

    from deviceplugin.dra.driver import DraDriverDaemon
    from tests.deviceplugin.support import wait_until

    daemon = DraDriverDaemon(options, None, retry_s=0.05)
    daemon.start()
    try:
        sockets = sorted(p.name for p in options.registry_dir.iterdir())
        assert sockets == ["cpu.kubenode.io-reg.sock", "gpu.kubenode.io-reg.sock"]
        shutil.rmtree(options.registry_dir)
        assert wait_until(lambda: all(d.reg_socket.exists() for d in daemon.drivers), timeout=10)
        with grpc.insecure_channel(f"unix://{daemon.drivers[0].reg_socket}") as channel:
            assert reg_grpc.RegistrationStub(channel).GetInfo(reg.InfoRequest(), timeout=5).name == CPU_DRIVER
    finally:
        daemon.stop()
    assert not any(options.registry_dir.iterdir())
