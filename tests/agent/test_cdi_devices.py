"""CDI names resolved by the agent (agent/cm/cdidevices.py) and who applies them (cri/cdisupport.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.apis.config import AgentConfig, load_config
from agent.cm.cdidevices import CdiDevices, CdiResolutionError
from agent.container.resources import ContainerResources, DeviceSpec, Mount
from agent.kuberuntime.cri.cdisupport import CdiForRuntime, runtime_applies_cdi
from agent.kuberuntime.cri.client import CRIError
from agent.kuberuntime.cri.configs import container_devices
from kubenode.api.cri.v1 import api_pb2 as cri
from kubenode.model import ValidationError

SPEC = {
    "cdiVersion": "0.6.0",
    "kind": "example.com/gpu",
    "containerEdits": {
        "env": ["GPU_DRIVER=555"],
        "mounts": [{"hostPath": "/opt/lib", "containerPath": "/lib/x"}],
    },
    "devices": [
        {
            "name": "0",
            "containerEdits": {
                "env": ["GPU=0", "SHARED=cdi"],
                "deviceNodes": [
                    {"path": "/dev/gpu0", "hostPath": "/dev/nvidia0", "permissions": "rw"},
                    {"path": "/dev/gpuctl"},
                ],
                "mounts": [{"hostPath": "/opt/fw", "containerPath": "/fw", "options": ["ro", "bind"]}],
                "hooks": [{"hookName": "createContainer", "path": "/usr/bin/gpu-hook"}],
            },
        },
        {"name": "1", "containerEdits": {"env": ["GPU=1"]}},
    ],
}


@pytest.fixture
def cdi(tmp_path: Path) -> CdiDevices:
    (tmp_path / "gpu.json").write_text(json.dumps(SPEC))
    return CdiDevices([tmp_path])


def test_resolved_names_become_env_devices_and_mounts_and_are_spent(cdi: CdiDevices) -> None:
    given = ContainerResources(
        envs={"SHARED": "plugin", "PLUGIN": "yes"},
        devices=[DeviceSpec("/dev/gpuctl", "/dev/old", "r")],
        mounts=[Mount("/plugin", "/host/plugin")],
        cdi_devices=["example.com/gpu=0"],
        cpuset="1",
    )
    resolved = cdi.apply(given)
    # The plugins' env first, a CDI entry of the same name over it; the spec's own edits once.
    assert resolved.envs == {"SHARED": "cdi", "PLUGIN": "yes", "GPU_DRIVER": "555", "GPU": "0"}
    assert resolved.devices == given.devices  # the plugins' own; the CDI nodes stay in cdi_edits
    assert resolved.mounts == [
        Mount("/plugin", "/host/plugin"),
        Mount("/fw", "/opt/fw", True),  # CDI's mounts parents first (by depth), as CDI injects them
        Mount("/lib/x", "/opt/lib", False),
    ]
    assert resolved.cdi_devices == [] and resolved.cpuset == "1"
    assert resolved.cdi_edits is not None
    assert [h.path for h in resolved.cdi_edits.hooks] == ["/usr/bin/gpu-hook"]  # for the process runtime
    # The CRI config: the plugin's devices, then the CDI nodes, one at a plugin device's path replacing it.
    assert [(d.container_path, d.host_path, d.permissions) for d in container_devices(resolved)] == [
        ("/dev/gpu0", "/dev/nvidia0", "rw"),
        ("/dev/gpuctl", "/dev/gpuctl", "rwm"),
    ]
    assert cdi.apply(ContainerResources(envs={"A": "1"})) == ContainerResources(envs={"A": "1"})


def test_an_unknown_name_or_a_broken_spec_is_one_line_naming_them(cdi: CdiDevices, tmp_path: Path) -> None:
    with pytest.raises(CdiResolutionError, match=r"unresolvable CDI devices: example.com/gpu=7\Z"):
        cdi.apply(ContainerResources(cdi_devices=["example.com/gpu=0", "example.com/gpu=7"]))
    (tmp_path / "other.yaml").write_text("cdiVersion: 0.6.0\nkind: other.com/x\ndevices: []\n")
    with pytest.raises(CdiResolutionError) as caught:
        cdi.apply(ContainerResources(cdi_devices=["other.com/x=a"]))
    message = str(caught.value)
    assert "other.com/x=a" in message and str(tmp_path / "other.yaml") in message and "\n" not in message
    # The good spec still resolves beside the broken one.
    assert cdi.apply(ContainerResources(cdi_devices=["example.com/gpu=1"])).envs["GPU"] == "1"


def version(name: str, release: str) -> cri.VersionResponse:
    return cri.VersionResponse(runtime_name=name, runtime_version=release)


@pytest.mark.parametrize(
    ("setting", "name", "release", "config", "applies"),
    [
        ("auto", "containerd", "1.6.20~ds1", None, False),
        ("auto", "containerd", "v1.7.13", {"enableCDI": True}, True),
        ("auto", "containerd", "v1.7.13", {"enableCDI": False}, False),
        ("auto", "containerd", "v2.0.0", None, True),
        ("auto", "cri-o", "1.30.1", None, True),
        ("auto", "cri-o", "1.22.0", None, False),
        ("auto", "someruntime", "9.9", None, False),
        ("true", "containerd", "1.6.20", None, True),
        ("false", "containerd", "2.1.0", None, False),
    ],
)
def test_who_applies_cdi(
    setting: str, name: str, release: str, config: dict[str, bool] | None, applies: bool
) -> None:
    asked: list[bool] = []

    def status_info() -> dict[str, str]:
        asked.append(True)
        return {"config": json.dumps(config)}

    assert runtime_applies_cdi(setting, version(name, release), status_info) is applies
    assert bool(asked) == (config is not None)  # Status only where the answer depends on it


def test_the_runtime_is_asked_once_and_a_refused_status_means_the_agent_resolves(cdi: CdiDevices) -> None:
    asked: list[str] = []

    def version() -> cri.VersionResponse:
        asked.append("Version")
        return cri.VersionResponse(runtime_name="containerd", runtime_version="v1.7.2")

    def call(method: str, request: object) -> object:
        asked.append(method)
        raise CRIError("unimplemented")  # not UNAVAILABLE: the answer is "no CDI", not "retry"

    prepare = CdiForRuntime(cdi.apply, "auto", version, call).prepare
    given = ContainerResources(cdi_devices=["example.com/gpu=1"])
    assert prepare(ContainerResources(envs={"A": "1"})) == ContainerResources(envs={"A": "1"})
    assert asked == []  # no CDI names: nothing to decide
    assert prepare(given).envs == {"GPU": "1", "GPU_DRIVER": "555"} and prepare(given).cdi_devices == []
    assert asked == ["Version", "Status"]
    kept = CdiForRuntime(cdi.apply, "true", version, call).prepare(given)
    assert kept is given  # the runtime applies them: the names travel as CDI_devices


def test_the_cdi_settings_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("criAppliesCdi: false\ncdiSpecDirs: [/etc/cdi]\n")
    config = load_config(path)
    assert (config.cri_applies_cdi, config.cdi_spec_dirs) == ("false", ["/etc/cdi"])
    assert AgentConfig().cdi_spec_dirs == ["/etc/cdi", "/var/run/cdi"]
    path.write_text("criAppliesCdi: maybe\n")
    with pytest.raises(ValidationError, match="criAppliesCdi: must be auto, true or false"):
        load_config(path)
    path.write_text("cdiSpecDirs: [relative]\n")
    with pytest.raises(ValidationError, match="cdiSpecDirs: must be a list of absolute paths"):
        load_config(path)
