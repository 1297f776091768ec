"""kubenode/cdi: spec files in temporary directories, read, checked and resolved; every bad input gives
one line naming the file and the field (or the unknown device)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubenode.cdi.edits import ContainerEdits, DeviceNode, Hook, Mount
from kubenode.cdi.names import CdiNameError, parse_qualified_name
from kubenode.cdi.registry import SPEC_DIRS, UnresolvedDevices, load_registry
from kubenode.cdi.spec import SpecError, read_spec


def gpu_spec(**extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "cdiVersion": "0.5.0",
        "kind": "vendor.com/gpu",
        "devices": [
            {"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/vgpu0", "hostPath": "/dev/null"}],
                                             "env": ["VGPU=0"]}},
            {"name": "1", "containerEdits": {"deviceNodes": [{"path": "/dev/vgpu1", "permissions": "rw"}],
                                             "env": ["VGPU=1"]}},
        ],
        "containerEdits": {
            "env": ["VGPU_DRIVER=9"],
            "deviceNodes": [{"path": "/dev/vgpuctl", "type": "c", "major": 195, "minor": 255}],
            "mounts": [{"hostPath": "/usr/lib/libvgpu.so", "containerPath": "/usr/lib/libvgpu.so",
                        "options": ["ro", "bind"]}],
            "hooks": [{"hookName": "createContainer", "path": "/usr/bin/vgpu-hook",
                       "args": ["vgpu-hook", "x"], "timeout": 5}],
        },
    }  # fmt: skip
    spec.update(extra)
    return spec


def write(directory: Path, name: str, spec: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(spec if isinstance(spec, str) else json.dumps(spec))
    return path


def test_default_spec_dirs_in_priority_order() -> None:
    assert [str(d) for d in SPEC_DIRS] == ["/etc/cdi", "/var/run/cdi"]


def test_a_json_spec_is_read_into_typed_edits(tmp_path: Path) -> None:
    spec = read_spec(write(tmp_path, "vendor.json", gpu_spec()))
    assert (spec.vendor, spec.device_class, spec.version) == ("vendor.com", "gpu", "0.5.0")
    assert [device.name for device in spec.devices] == ["0", "1"]
    assert spec.edits.device_nodes == (DeviceNode("/dev/vgpuctl", type="c", major=195, minor=255),)
    assert spec.edits.mounts == (Mount("/usr/lib/libvgpu.so", "/usr/lib/libvgpu.so", ("ro", "bind")),)
    assert spec.edits.hooks == (Hook("createContainer", "/usr/bin/vgpu-hook", ("vgpu-hook", "x"), (), 5),)
    assert spec.devices[1].edits.device_nodes[0].cgroup_access == "rw"
    assert spec.devices[0].edits.device_nodes[0].source == "/dev/null"


YAML_SPEC = """\
---
cdiVersion: "0.6.0"
kind: example.com/fpga.v2
annotations: {owner: me}
devices:
  - name: card-a
    containerEdits:
      deviceNodes:
        - {path: /dev/fpga0, permissions: none, fileMode: 0640, uid: 0, gid: 44}
"""


def test_a_yaml_spec_is_read(tmp_path: Path) -> None:
    spec = read_spec(write(tmp_path, "fpga.yaml", YAML_SPEC))
    node = spec.devices[0].edits.device_nodes[0]
    assert spec.kind == "example.com/fpga.v2" and dict(spec.annotations) == {"owner": "me"}
    assert (node.permissions, node.cgroup_access, node.file_mode, node.gid) == ("none", "", 0o640, 44)


def test_our_cpu_plugins_spec_shape_is_read(tmp_path: Path) -> None:
    """deviceplugin/cdi.py writes this shape (kind kubenode.io/cpuset, cdiVersion 0.5.0)."""
    hook = {"hookName": "createRuntime", "path": "/usr/bin/kubenode", "args": ["kubenode"], "timeout": 10}
    edits = {"env": ["KUBENODE_CPUSET=0-1,4"], "hooks": [hook]}
    spec = {
        "cdiVersion": "0.5.0",
        "kind": "kubenode.io/cpuset",
        "devices": [{"name": "0-1_4", "containerEdits": edits}],
    }
    registry = load_registry([write(tmp_path / "run", "kubenode-cpuset_cpu.json", spec).parent])
    assert registry.resolve(["kubenode.io/cpuset=0-1_4"]).env == ("KUBENODE_CPUSET=0-1,4",)


def _device(name: str, **edits: Any) -> dict[str, Any]:
    return {"devices": [{"name": name, "containerEdits": edits}]}


def _edits(**edits: Any) -> dict[str, Any]:
    return {"containerEdits": edits}


NODE = "containerEdits.deviceNodes[0]"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cdiVersion": "0.9.0"}, "cdiVersion: '0.9.0' is not a released CDI version"),
        ({"cdiVersion": "0.4.0"}, "cdiVersion: 0.4.0 is too old for the fields used; they need 0.5.0"),
        ({"kind": "gpu"}, "kind: kind 'gpu' must be vendor/class"),
        ({"kind": "vendor.com/gp u"}, "kind: class 'gp u' must start with a letter"),
        ({"devices": []}, "devices: a spec needs at least one device"),
        (_device("a"), "devices[0].containerEdits: a device needs at least one edit"),
        (_device("-a", env=["A=1"]), "devices[0].name: device name '-a'"),
        (_device("a", env=["=1"]), "devices[0].containerEdits.env[0]: '=1' must be NAME=VALUE"),
        ({"devices": _device("a", env=["A=1"])["devices"] * 2}, "devices[1].name: 'a' is defined twice"),
        ({"devices": [{"name": "a", "containerEdit": {}}]}, "devices[0].containerEdit: unknown field"),
        ({"cdiversion": "0.5.0"}, "cdiversion: unknown field"),
        (_edits(deviceNodes=[{"path": "/dev/x", "type": "x"}]), f"{NODE}.type: 'x' must be b, c, u or p"),
        (
            _edits(deviceNodes=[{"path": "/dev/x", "permissions": "rwx"}]),
            f"{NODE}.permissions: 'rwx' must combine",
        ),
        (_edits(deviceNodes=[{"hostPath": "/dev/x"}]), f"{NODE}.path: required"),
        (_edits(deviceNodes=[{"path": "/dev/x", "major": "1"}]), f"{NODE}.major: must be an integer"),
        (_edits(mounts=[{"hostPath": "/a"}]), "containerEdits.mounts[0].containerPath: required"),
        (
            _edits(hooks=[{"hookName": "preStart", "path": "/h"}]),
            "hooks[0].hookName: 'preStart' is not one of",
        ),
        (
            _edits(hooks=[{"hookName": "poststop", "path": "/h", "timeout": 0}]),
            "timeout: must be greater than zero",
        ),
        (_edits(additionalGids=[5]), "they need 0.7.0"),
        (
            {"cdiVersion": "1.0.0", **_edits(netDevices=[{"hostInterfaceName": "e", "name": "n"}])},
            "they need 1.1.0",
        ),
    ],
)
def test_a_bad_spec_is_one_line_naming_file_and_field(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    path = write(tmp_path, "bad.json", gpu_spec(**change))
    if "cdiversion" in change:
        path = write(tmp_path, "bad.json", {k: v for k, v in gpu_spec(**change).items() if k != "cdiVersion"})
    with pytest.raises(SpecError) as raised:
        read_spec(path)
    assert str(raised.value).startswith(f"{path}: "), str(raised.value)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_newer_fields_pass_with_their_version(tmp_path: Path) -> None:
    spec = gpu_spec(
        cdiVersion="v1.1.0", containerEdits={"netDevices": [{"hostInterfaceName": "e", "name": "n"}]}
    )
    assert read_spec(write(tmp_path, "new.json", spec)).version == "1.1.0"


def test_a_file_that_does_not_parse_is_named(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"broken\.json: not valid JSON: "):
        read_spec(write(tmp_path, "broken.json", "{"))
    with pytest.raises(SpecError, match=r"broken\.yaml: not valid YAML: "):
        read_spec(write(tmp_path, "broken.yaml", "devices: [\n"))
    with pytest.raises(SpecError, match=r"list\.yaml: the document: must be an object"):
        read_spec(write(tmp_path, "list.yaml", "- 1\n"))


def test_resolve_merges_spec_edits_once_then_device_edits(tmp_path: Path) -> None:
    write(tmp_path / "etc", "vendor.json", gpu_spec())
    edits = load_registry([tmp_path / "etc"]).resolve(["vendor.com/gpu=1", "vendor.com/gpu=0"])
    assert edits.env == ("VGPU_DRIVER=9", "VGPU=1", "VGPU=0")
    assert [node.path for node in edits.device_nodes] == ["/dev/vgpuctl", "/dev/vgpu1", "/dev/vgpu0"]
    assert len(edits.hooks) == len(edits.mounts) == 1
    assert edits.applied().env == ("VGPU_DRIVER=9", "VGPU=0")  # the later VGPU wins, in the first's place


def test_applied_replaces_by_path_and_orders_mounts_by_depth() -> None:
    edits = ContainerEdits(
        device_nodes=(DeviceNode("/dev/a", major=1), DeviceNode("/dev/b"), DeviceNode("/dev/a", major=2)),
        mounts=(Mount("/h1", "/x/y"), Mount("/h2", "/x"), Mount("/h3", "/x/y")),
        additional_gids=(0, 5, 5),
    ).applied()
    assert edits.device_nodes == (DeviceNode("/dev/b"), DeviceNode("/dev/a", major=2))
    assert edits.mounts == (Mount("/h2", "/x"), Mount("/h3", "/x/y"))
    assert edits.additional_gids == (5,)


def test_the_later_directory_wins_and_broken_files_are_skipped(tmp_path: Path) -> None:
    etc, run = tmp_path / "etc", tmp_path / "run"
    write(etc, "vendor.json", gpu_spec())
    override = gpu_spec(devices=[{"name": "0", "containerEdits": {"env": ["FROM=run"]}}])
    write(run, "vendor.yaml", json.dumps(override))  # JSON is YAML
    write(run, "broken.json", "{")
    write(run, "ignored.txt", "not a spec")
    (run / "sub.json").mkdir()
    registry = load_registry([etc, run, tmp_path / "missing"])
    assert registry.errors == [f"{run}/broken.json: not valid JSON: Expecting property name enclosed in "
                               "double quotes: line 1 column 2 (char 1)"]  # fmt: skip
    assert "FROM=run" in registry.resolve(["vendor.com/gpu=0"]).env
    assert "VGPU=1" in registry.resolve(["vendor.com/gpu=1"]).env


def test_a_conflict_in_one_directory_drops_the_device_naming_both(tmp_path: Path) -> None:
    write(tmp_path, "a.json", gpu_spec())
    write(tmp_path, "b.json", gpu_spec(devices=[{"name": "1", "containerEdits": {"env": ["B=1"]}}]))
    registry = load_registry([tmp_path])
    assert registry.errors == [
        f"CDI device vendor.com/gpu=1 is defined in both {tmp_path}/a.json and {tmp_path}/b.json"
    ]
    assert registry.resolve(["vendor.com/gpu=0"]).env[-1] == "VGPU=0"
    with pytest.raises(
        UnresolvedDevices, match=r"^unresolvable CDI devices: vendor\.com/gpu=1 \(spec errors: CDI"
    ):
        registry.resolve(["vendor.com/gpu=1"])


def test_unknown_and_malformed_names_are_named(tmp_path: Path) -> None:
    write(tmp_path, "vendor.json", gpu_spec())
    with pytest.raises(UnresolvedDevices) as raised:
        load_registry([tmp_path]).resolve(["vendor.com/gpu=0", "vendor.com/gpu=7", "gpu0"])
    assert str(raised.value) == (
        "unresolvable CDI devices: vendor.com/gpu=7, CDI device 'gpu0' is not qualified (vendor/class=name)"
    )


@pytest.mark.parametrize(
    ("name", "parts"),
    [
        ("nvidia.com/gpu=0", ("nvidia.com", "gpu", "0")),
        ("k8s.device-plugin.nvidia.com/gpu=GPU-1:2", ("k8s.device-plugin.nvidia.com", "gpu", "GPU-1:2")),
        ("kubenode.io/cpuset=0-1_4", ("kubenode.io", "cpuset", "0-1_4")),
    ],
)
def test_qualified_names(name: str, parts: tuple[str, str, str]) -> None:
    assert parse_qualified_name(name) == parts


@pytest.mark.parametrize(
    "name", ["nvidia.com/gpu", "nvidia.com/gpu=", "/gpu=0", "1vendor/gpu=0", "v/c=0-", "v/c/d=0"]
)
def test_bad_qualified_names(name: str) -> None:
    with pytest.raises(CdiNameError, match=f"CDI device '{name}'"):
        parse_qualified_name(name)
