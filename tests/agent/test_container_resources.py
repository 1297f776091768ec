"""A container's resources (agent/container/resources.py): one typed value from the device plugins' answers
to the runtimes, kept typed in the pod record."""

from __future__ import annotations

import json
from pathlib import Path

from agent.cm.devicemanager.runoptions import merge_responses
from agent.container.podrecord import PodRecord, RecordStore
from agent.container.resources import ContainerResources, DeviceSpec, Mount
from agent.kuberuntime.cri.configs import container_config
from kubenode.api.deviceplugin.v1beta1 import api_pb2
from kubenode.model.parse import parse_pod

GIVEN = ContainerResources(
    envs={"KUBENODE_CPUSET": "2-3", "GPU": "0"},
    mounts=[Mount("/etc/gpu", "/var/lib/gpu", read_only=True)],
    devices=[DeviceSpec("/dev/gpu0", "/dev/nvidia0", "rw")],
    annotations={"example.com/gpu": "0"},
    cdi_devices=["example.com/gpu=0"],
    cpuset="2-3",
)


def test_the_plugins_answers_merge_into_one_typed_value() -> None:
    response = api_pb2.ContainerAllocateResponse(
        envs={"GPU": "0"},
        mounts=[api_pb2.Mount(container_path="/etc/gpu", host_path="/var/lib/gpu", read_only=True)],
        devices=[api_pb2.DeviceSpec(container_path="/dev/gpu0", host_path="/dev/nvidia0", permissions="rw")],
        annotations={"example.com/gpu": "0"},
        cdi_devices=[api_pb2.CDIDevice(name="example.com/gpu=0")],
    )
    merged = merge_responses([("example.com/gpu", response)])
    assert merged == ContainerResources(
        envs={"GPU": "0"},
        mounts=[Mount("/etc/gpu", "/var/lib/gpu", True)],
        devices=[DeviceSpec("/dev/gpu0", "/dev/nvidia0", "rw")],
        annotations={"example.com/gpu": "0"},
        cdi_devices=["example.com/gpu=0"],
    )
    assert merged.with_cpuset("2-3").cpuset == "2-3"


def test_the_record_keeps_resources_typed_across_a_restart(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    record = PodRecord("0d2c4a8e-1b1a-4c55-9d8e-3f1c2b4a5d6e", "default", "gpu")
    record.resources["main"] = GIVEN
    store.save(record)
    assert store.flush(timeout=10)
    saved = json.loads(store.path(record.uid).read_text())
    assert saved["resources"]["main"]["devices"] == [["/dev/gpu0", "/dev/nvidia0", "rw"]]
    records, problems = RecordStore(tmp_path).load_all()
    assert problems == []
    assert records[record.uid].resources == {"main": GIVEN}


def test_a_record_saved_with_the_old_string_specs_loads_without_them() -> None:
    old = {
        "uid": "0d2c4a8e-1b1a-4c55-9d8e-3f1c2b4a5d6e",
        "namespace": "default",
        "name": "gpu",
        "device_specs": {"main": ["/dev/nvidia0:/dev/gpu0:rw"]},
        "mounts": {"main": ["/var/lib/gpu:/etc/gpu:ro"]},
    }
    record = PodRecord.from_json(old)
    assert record.resources == {}  # filled again, typed, by the pod's next sync from the device manager


def test_a_record_with_unusable_resources_names_the_field() -> None:
    bad = {
        "uid": "0d2c4a8e-1b1a-4c55-9d8e-3f1c2b4a5d6e",
        "namespace": "d",
        "name": "p",
        "resources": {"main": 3},
    }
    try:
        PodRecord.from_json(bad)
    except ValueError as exc:
        assert str(exc).startswith("resources.main:")
    else:
        raise AssertionError("a number taken for a container's resources")


def test_the_cri_container_gets_devices_mounts_annotations_cdi_names_and_the_cpuset() -> None:
    pod = parse_pod(
        {
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "1"]}]},
        }
    )
    config = container_config(
        pod, pod.containers[0], env=dict(GIVEN.envs), restart_count=0, node="n", resources=GIVEN
    )
    assert [(d.host_path, d.container_path, d.permissions) for d in config.devices] == [
        ("/dev/nvidia0", "/dev/gpu0", "rw")
    ]
    assert [(m.host_path, m.container_path, m.readonly) for m in config.mounts] == [
        ("/var/lib/gpu", "/etc/gpu", True)
    ]
    assert config.annotations["example.com/gpu"] == "0"
    assert [d.name for d in config.CDI_devices] == ["example.com/gpu=0"]
    assert config.linux.resources.cpuset_cpus == "2-3"
