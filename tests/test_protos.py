"""The committed gRPC modules match the .proto sources, and the wire names are the kubelet's."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

from kubenode.api.cri.v1 import api_pb2 as cri
from kubenode.api.deviceplugin.v1beta1 import api_pb2 as dp
from kubenode.api.dra.v1 import api_pb2 as dra_v1
from kubenode.api.dra.v1beta1 import api_pb2 as dra_v1beta1
from kubenode.api.pluginregistration.v1 import api_pb2 as reg
from kubenode.api.podresources.v1 import api_pb2 as pr

ROOT = Path(__file__).resolve().parent.parent


def test_generated_code_is_current(tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "tools" / "genproto.py"), "--out", str(tmp_path)], check=True)
    generated = tmp_path / "kubenode" / "api"
    committed = ROOT / "kubenode" / "api"
    stale = []
    for new in sorted(generated.rglob("*.py*")):
        old = committed / new.relative_to(generated)
        if not old.exists() or not filecmp.cmp(new, old, shallow=False):
            stale.append(str(old.relative_to(ROOT)))
    assert not stale, f"generated code is out of date with protos/ (run `make protos`): {stale}"


def test_device_plugin_wire_names() -> None:
    fd = dp.DESCRIPTOR
    assert fd.package == "v1beta1"
    assert set(fd.services_by_name) == {"Registration", "DevicePlugin"}
    rpcs = {m.name for m in fd.services_by_name["DevicePlugin"].methods}
    assert rpcs == {
        "GetDevicePluginOptions",
        "ListAndWatch",
        "GetPreferredAllocation",
        "Allocate",
        "PreStartContainer",
    }
    fields = {
        (msg, f.name): (f.number, f.type) for msg, d in fd.message_types_by_name.items() for f in d.fields
    }
    fdesc = dp.Device.DESCRIPTOR.fields_by_name
    assert fdesc["ID"].number == 1 and fdesc["health"].number == 2 and fdesc["topology"].number == 3
    assert fields[("ContainerPreferredAllocationRequest", "available_deviceIDs")][0] == 1
    assert fields[("ContainerPreferredAllocationRequest", "must_include_deviceIDs")][0] == 2
    assert fields[("ContainerPreferredAllocationRequest", "allocation_size")][0] == 3
    assert fields[("ContainerAllocateResponse", "cdi_devices")][0] == 5
    assert fields[("ContainerAllocateResponse", "annotations")][0] == 4
    assert fields[("RegisterRequest", "options")][0] == 4
    assert fields[("DeviceSpec", "permissions")][0] == 3
    assert fields[("NUMANode", "ID")][0] == 1


def test_podresources_wire_names() -> None:
    fd = pr.DESCRIPTOR
    assert fd.package == "v1"
    rpcs = {m.name for m in fd.services_by_name["PodResourcesLister"].methods}
    assert rpcs == {"List", "GetAllocatableResources", "Get"}
    assert pr.PodResources.DESCRIPTOR.fields_by_name["cpu_ids"].number == 4
    assert pr.ContainerResources.DESCRIPTOR.fields_by_name["dynamic_resources"].number == 5
    assert pr.ClaimResource.DESCRIPTOR.fields_by_name["share_id"].has_presence
    assert (
        pr.ContainerMemory.DESCRIPTOR.fields_by_name["size"].type
        == pr.ContainerMemory.DESCRIPTOR.fields_by_name["size"].TYPE_UINT64
    )


def test_cri_wire_names() -> None:
    fd = cri.DESCRIPTOR
    assert fd.package == "runtime.v1"
    assert {"RuntimeService", "ImageService"} <= set(fd.services_by_name)
    rpcs = {m.name for m in fd.services_by_name["RuntimeService"].methods}
    assert {"RunPodSandbox", "CreateContainer", "StartContainer", "StopContainer", "ExecSync"} <= rpcs
    assert cri.LinuxContainerResources.DESCRIPTOR.fields_by_name["cpuset_cpus"].number == 6
    assert cri.LinuxPodSandboxConfig.DESCRIPTOR.fields_by_name["cgroup_parent"].number == 1


def test_plugin_registration_wire_names() -> None:
    fd = reg.DESCRIPTOR
    assert fd.package == "pluginregistration"
    rpcs = {m.name for m in fd.services_by_name["Registration"].methods}
    assert rpcs == {"GetInfo", "NotifyRegistrationStatus"}
    info = reg.PluginInfo.DESCRIPTOR.fields_by_name
    assert [info[n].number for n in ("type", "name", "endpoint", "supported_versions")] == [1, 2, 3, 4]
    assert reg.RegistrationStatus.DESCRIPTOR.fields_by_name["plugin_registered"].number == 1


def test_dra_wire_names() -> None:
    for mod, package in (
        (dra_v1, "k8s.io.kubelet.pkg.apis.dra.v1"),
        (dra_v1beta1, "k8s.io.kubelet.pkg.apis.dra.v1beta1"),
    ):
        fd = mod.DESCRIPTOR
        assert fd.package == package
        rpcs = {m.name for m in fd.services_by_name["DRAPlugin"].methods}
        assert rpcs == {"NodePrepareResources", "NodeUnprepareResources"}
        device = mod.Device.DESCRIPTOR.fields_by_name
        assert [
            device[n].number for n in ("request_names", "pool_name", "device_name", "cdi_device_ids")
        ] == [
            1,
            2,
            3,
            4,
        ]
        claim = mod.Claim.DESCRIPTOR.fields_by_name
        assert [claim[n].number for n in ("namespace", "uid", "name")] == [1, 2, 3]
        assert mod.NodePrepareResourceResponse.DESCRIPTOR.fields_by_name["error"].number == 2
