"""The shipped DaemonSet and systemd unit say what the docs promise, and the ConfigMap's config is valid."""

from __future__ import annotations

import configparser
from pathlib import Path

import yaml

from deviceplugin.config import parse_config

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


def test_systemd_unit() -> None:
    unit = configparser.ConfigParser(strict=False)
    unit.read(ROOT / "systemd/kubenode-deviceplugin.service")
    assert unit["Service"]["Type"] == "notify"
    assert unit["Service"]["Restart"] == "always"
    assert "kubenode deviceplugin" in unit["Service"]["ExecStart"]
