"""The Dockerfile and the Kubernetes manifests agree: one image name (tagged with the package version),
the image's entrypoint is `kubenode` and the manifests only pass it arguments, the DaemonSets run as root
over a non-root default, and the GPU plugin gets NVML from the NVIDIA runtime.

These read text; tests/image builds the image with podman and runs the DaemonSets' containers from it."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _instruction(name: str) -> list[str]:
    return [m.group(1).strip() for m in re.finditer(rf"^{name}\s+(.+)$", DOCKERFILE, re.MULTILINE)]


def _containers() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted((ROOT / "deploy").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document["kind"] == "DaemonSet":
                pod = document["spec"]["template"]["spec"]
                found += [(path.name, c) for c in pod["containers"] + pod.get("initContainers", [])]
    return found


def test_multi_stage_on_one_base_argument_with_a_non_root_default() -> None:
    """Both stages on ARG BASE: the local Debian base and a registry's slim Python share every other line."""
    assert _instruction("FROM") == ["${BASE} AS build", "${BASE}"]
    [default] = _instruction("ARG")
    assert re.fullmatch(r"BASE=python:3\.1[1-9]-slim-\w+", default), default
    assert "--no-index" in DOCKERFILE  # wheels built on the host; pip in the build sees no index
    assert "--from=build" in DOCKERFILE
    assert _instruction("USER") == ["65532:65532"]


def test_manifests_name_the_one_image_and_use_its_entrypoint() -> None:
    [label] = re.findall(r'io\.kubenode\.image="([^"]+)"', DOCKERFILE)
    assert f"{label}:{VERSION}" in DOCKERFILE
    assert f'IMAGE = f"{label}:{{version()}}"' in (ROOT / "tools/image.py").read_text()
    assert json.loads(_instruction("ENTRYPOINT")[0]) == ["kubenode"]
    containers = _containers()
    assert {name for name, _ in containers} == {
        "agent-daemonset.yaml",
        "deviceplugin-daemonset.yaml",
        "dra-driver-daemonset.yaml",
    }
    for name, container in containers:
        assert container["image"] == f"{label}:{VERSION}", name
        assert "command" not in container, f"{name}: `command` would replace the image's entrypoint"
        assert container["args"][0] in ("agent", "deviceplugin", "dra-driver", "cdi-hook"), name
        assert container["securityContext"]["runAsUser"] == 0, name
    for path in [*(ROOT / "deploy").glob("*.yaml"), ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for image in re.findall(r"(?:image:|-t)\s*(\S*kubenode[^\s:]*:\S+)", path.read_text()):
            assert image == f"{label}:{VERSION}", f"{path.name} names {image}"


def test_gpu_plugin_gets_nvml_from_the_nvidia_runtime() -> None:
    [(_, plugin)] = [
        (n, c) for n, c in _containers() if n == "deviceplugin-daemonset.yaml" and c["name"] == "deviceplugin"
    ]
    env = {e["name"]: e["value"] for e in plugin["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert "utility" in env["NVIDIA_DRIVER_CAPABILITIES"].split(",")  # NVML is a "utility" capability
