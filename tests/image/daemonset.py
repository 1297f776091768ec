"""A DaemonSet's container as a `podman run` line: its args, env, securityContext and mounts, read from the
manifest under deploy/, so the image test runs exactly what a node would.

Each hostPath is bound from a directory the test chooses (`host_dirs`, keyed by the manifest's host path) at
the manifest's mountPath, with its readOnly; a configMap is written from the manifest's own ConfigMap
(or a test's edit of it). securityContext maps field by field: runAsUser -> --user, privileged ->
--privileged, capabilities drop/add -> --cap-drop/--cap-add, allowPrivilegeEscalation: false ->
no-new-privileges, readOnlyRootFilesystem -> --read-only without podman's extra tmpfs mounts (a kubelet
adds none). A field it does not know fails the test rather than being dropped. Without hostNetwork the
container gets no network (the pod network is not what is tested here).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
KNOWN_SECURITY = {
    "runAsUser",
    "privileged",
    "capabilities",
    "allowPrivilegeEscalation",
    "readOnlyRootFilesystem",
    "seccompProfile",
}


def documents(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((ROOT / "deploy" / name).read_text()) if doc]


def pod_spec(name: str) -> dict[str, Any]:
    [daemonset] = [doc for doc in documents(name) if doc["kind"] == "DaemonSet"]
    spec: dict[str, Any] = daemonset["spec"]["template"]["spec"]
    return spec


def config_map(name: str) -> dict[str, str]:
    [found] = [doc for doc in documents(name) if doc["kind"] == "ConfigMap"]
    data: dict[str, str] = found["data"]
    return data


def container(name: str, container_name: str) -> dict[str, Any]:
    spec = pod_spec(name)
    [found] = [c for c in spec["containers"] + spec.get("initContainers", []) if c["name"] == container_name]
    result: dict[str, Any] = found
    return result


def security_flags(context: Mapping[str, Any]) -> list[str]:
    unknown = set(context) - KNOWN_SECURITY
    assert not unknown, f"securityContext fields the image test cannot map: {sorted(unknown)}"
    flags = [f"--user={context['runAsUser']}"] if "runAsUser" in context else []
    if context.get("privileged"):
        flags.append("--privileged")
    capabilities = context.get("capabilities", {})
    flags += [f"--cap-drop={cap.lower()}" for cap in capabilities.get("drop", [])]
    flags += [f"--cap-add={cap.lower()}" for cap in capabilities.get("add", [])]
    if context.get("allowPrivilegeEscalation") is False:
        flags.append("--security-opt=no-new-privileges")
    if context.get("readOnlyRootFilesystem"):
        flags += ["--read-only", "--read-only-tmpfs=false"]
    profile = context.get("seccompProfile", {}).get("type", "RuntimeDefault")
    assert profile == "RuntimeDefault", profile  # podman's default profile
    return flags


def run_args(
    manifest: str,
    container_name: str,
    image: str,
    host_dirs: Mapping[str, Path],
    config_dir: Path,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """`podman run` arguments (after `run`) for the container; `config_dir` receives configMap files."""
    spec = pod_spec(manifest)
    ctr = container(manifest, container_name)
    volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
    flags = security_flags(ctr.get("securityContext", {}))
    flags.append("--network=host" if spec.get("hostNetwork") else "--network=none")
    if spec.get("hostPID"):
        flags.append("--pid=host")
    values = dict(env or {})
    for variable in ctr.get("env", []):
        value = variable.get("value", values.get(variable["name"]))
        assert value is not None, f"env {variable['name']}: give its value (valueFrom) to run_args"
        values[variable["name"]] = value
    flags += [f"--env={key}={value}" for key, value in values.items()]
    for mount in ctr.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "hostPath" in volume:
            source = host_dirs[volume["hostPath"]["path"]]
        elif "configMap" in volume:
            source = config_dir / mount["name"]
            source.mkdir(exist_ok=True)
            if "subPath" in mount:
                source = source / mount["subPath"]
        else:
            raise AssertionError(f"volume {mount['name']}: only hostPath and configMap are mapped")
        suffix = ":ro" if mount.get("readOnly") else ""
        flags.append(f"--volume={source}:{mount['mountPath']}{suffix}")
    args = [_expand(arg, values) for arg in ctr.get("args", [])]
    return [*flags, image, *args]


def write_config(config_dir: Path, volume: str, data: Mapping[str, str]) -> None:
    """A configMap volume's files, as the kubelet projects them."""
    directory = config_dir / volume
    directory.mkdir(parents=True, exist_ok=True)
    for key, text in data.items():
        (directory / key).write_text(text)


def _expand(arg: str, values: Mapping[str, str]) -> str:
    for key, value in values.items():
        arg = arg.replace(f"$({key})", value)
    return arg
