"""The shipped DaemonSet and systemd unit say what the docs promise, and the ConfigMap's config is valid."""

from __future__ import annotations

import configparser
from pathlib import Path

import yaml

from deviceplugin.config import parse_config
from kubenode.ports import DEVICEPLUGIN_METRICS_PORT

ROOT = Path(__file__).resolve().parent.parent.parent


def test_daemonset_and_configmap() -> None:
    config_map, daemon_set = yaml.safe_load_all((ROOT / "deploy/deviceplugin-daemonset.yaml").read_text())
    config = parse_config(yaml.safe_load(config_map["data"]["deviceplugin.yaml"]), source="configmap")
    assert [r.backend for r in config.resources] == ["cpu", "gpu"]
    pod = daemon_set["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-node-critical"
    assert pod["tolerations"]
    host_paths = {v["name"]: v.get("hostPath", {}).get("path") for v in pod["volumes"]}
    assert host_paths["device-plugins"] == "/var/lib/kubelet/device-plugins"
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["device-plugins"] == "/var/lib/kubelet/device-plugins"
    [container] = pod["containers"]
    assert container["ports"] == [{"name": "metrics", "containerPort": DEVICEPLUGIN_METRICS_PORT}]
    assert container["args"][-2:] == ["--metrics-bind-address", f":{DEVICEPLUGIN_METRICS_PORT}"]


def test_systemd_unit() -> None:
    unit = configparser.ConfigParser(strict=False)
    unit.read(ROOT / "systemd/kubenode-deviceplugin.service")
    assert unit["Service"]["Type"] == "notify"
    assert unit["Service"]["Restart"] == "always"
    assert "kubenode deviceplugin" in unit["Service"]["ExecStart"]
