"""Invalid configs fail at start with the file and field named; the kubelet dir precedence."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deviceplugin.config import (
    ConfigError,
    load_config,
    parse_config,
    resolve_kubelet_dir,
)
from kubenode.deviceapi import DEFAULT_KUBELET_DIR, KUBELET_DIR_ENV
from kubenode.model.resources import extended_resource_name_problem


def static(*device_ids: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "example.com/dev",
        "backend": "static",
        "static": {"devices": [{"id": i} for i in device_ids]},
        **extra,
    }


@pytest.mark.parametrize(
    ("resources", "field", "words"),
    [
        ([{"name": "example.com/x", "backend": "fpga"}], "resources[0].backend", "unknown backend 'fpga'"),
        ([static("a"), {"name": "gpu", "backend": "gpu"}], "resources[1].name", "domain prefix"),
        ([{"name": "kubernetes.io/gpu", "backend": "gpu"}], "resources[0].name", "reserved"),
        ([{"name": "Example.com/gpu", "backend": "gpu"}], "resources[0].name", "RFC 1123 subdomain"),
        ([{"name": "example.com/-gpu", "backend": "gpu"}], "resources[0].name", "name part must consist"),
        ([static("a", "b", "a")], "resources[0].static.devices[2].id", "duplicate device ID 'a'"),
        ([static("x" * 64)], "resources[0].static.devices[0].id", "longer than 63"),
        ([static("x" * 62, replicas=2)], "resources[0].static.devices[0].id", "with replicas"),
        ([static("a"), static("b")], "resources[1].name", "duplicate resource"),
        ([static("a", replicas=0)], "resources[0].replicas", "at least 1"),
        ([static("a", colour="red")], "resources[0].colour", "unknown field"),
        (
            [{"name": "kubenode.io/cpu", "backend": "cpu", "cpu": {"reserved": "3-1"}}],
            "resources[0].cpu.reserved",
            "3-1",
        ),
        ([{"name": "kubenode.io/cpu", "backend": "cpu", "gpu": {}}], "resources[0].gpu", "backend is 'cpu'"),
        (
            [{"name": "kubenode.io/gpu", "backend": "gpu", "gpu": {"idStrategy": "serial"}}],
            "resources[0].gpu.idStrategy",
            "serial",
        ),
        ([], "resources", "at least one"),
        (
            [
                {
                    "name": "example.com/d",
                    "backend": "static",
                    "static": {"devices": [{"id": "a", "cdiDevices": ["x"]}]},
                }
            ],
            "resources[0].static.devices[0].cdiDevices",
            "CDI device 'x' is not qualified",
        ),
    ],
)
def test_invalid_config_names_file_and_field(resources: list[Any], field: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"version": "v1", "resources": resources}, source="config.yaml")
    message = str(caught.value)
    assert message.startswith(f"config.yaml: {field}: "), message
    assert words in message


def test_load_config_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "plugin.yaml"
    path.write_text("resources:\n  - name: example.com/a\n    backend: nope\n")
    with pytest.raises(ConfigError, match=r"^plugin\.yaml: resources\[0\]\.backend: "):
        load_config(path)
    path.write_text("resources: [")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_gpu_and_static_options_parse() -> None:
    config = parse_config(
        {
            "kubeletDir": "/k",
            "resources": [
                {
                    "name": "nvidia.com/gpu",
                    "backend": "gpu",
                    "gpu": {"ignoredXids": [13], "failOnInitError": True},
                },
                static("0", replicas=3),
            ],
        }
    )
    gpu, dev = config.resources
    assert gpu.gpu.ignored_xids == {13} and gpu.gpu.fail_on_init_error
    assert dev.replicas == 3 and dev.static.devices[0].id == "0"
    assert gpu.socket == "kubenode-nvidia.com-gpu.sock"


def test_a_static_device_may_answer_cdi_names() -> None:
    device = {"id": "a", "cdiDevices": ["example.com/dongle=a"]}
    config = parse_config(
        {"resources": [{"name": "example.com/d", "backend": "static", "static": {"devices": [device]}}]}
    )
    assert config.resources[0].static.devices[0].cdi_devices == ("example.com/dongle=a",)


def test_kubelet_dir_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    from_file = parse_config({"kubeletDir": "/from/file", "resources": [static("a")]})
    plain = parse_config({"resources": [static("a")]})
    monkeypatch.delenv(KUBELET_DIR_ENV, raising=False)
    assert resolve_kubelet_dir(None, plain) == DEFAULT_KUBELET_DIR
    assert resolve_kubelet_dir(None, from_file) == "/from/file"
    monkeypatch.setenv(KUBELET_DIR_ENV, "/from/env")
    assert resolve_kubelet_dir(None, from_file) == "/from/env"
    assert resolve_kubelet_dir("/from/flag", from_file) == "/from/flag"


def test_extended_resource_names() -> None:
    assert extended_resource_name_problem("nvidia.com/gpu") is None
    assert extended_resource_name_problem("kubenode.io/cpu") is None
    assert extended_resource_name_problem("requests.example.com/x") is not None
    assert extended_resource_name_problem("example.com/a/b") is not None
    assert extended_resource_name_problem("example.com/" + "a" * 64) is not None
