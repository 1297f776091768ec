"""The shipped DaemonSet and systemd unit say what the docs promise, and the ConfigMap's config is valid."""

from __future__ import annotations

import configparser
from pathlib import Path

import yaml

from deviceplugin.config import parse_config
from kubenode.ports import DEVICEPLUGIN_METRICS_PORT

ROOT = Path(__file__).resolve().parent.parent.parent


def test_daemonset_and_configmap() -> None:
    documents = {
        d["kind"]: d for d in yaml.safe_load_all((ROOT / "deploy/deviceplugin-daemonset.yaml").read_text())
    }
    config_map, daemon_set = documents["ConfigMap"], documents["DaemonSet"]
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


def test_daemonset_least_privilege() -> None:
    """No privileged container; every capability dropped; only the init container writes a host path of its
    own (the hook), the plugin only its sockets' and CDI's directories; no API access at all."""
    documents = {
        d["kind"]: d for d in yaml.safe_load_all((ROOT / "deploy/deviceplugin-daemonset.yaml").read_text())
    }
    pod = documents["DaemonSet"]["spec"]["template"]["spec"]
    assert documents["ServiceAccount"]["automountServiceAccountToken"] is False
    assert pod["automountServiceAccountToken"] is False and "Role" not in documents
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    for container in pod["initContainers"] + pod["containers"]:
        context = container["securityContext"]
        assert "privileged" not in context and context["capabilities"] == {"drop": ["ALL"]}, container["name"]
        assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
    [init] = pod["initContainers"]
    [plugin] = pod["containers"]
    assert init["args"] == ["cdi-hook", "install", "/opt/kubenode/cdi-hook"]
    assert [(host_paths[m["name"]], m["mountPath"]) for m in init["volumeMounts"]] == [
        ("/opt/kubenode/cdi-hook", "/opt/kubenode/cdi-hook")  # the same path: hook.json names host paths
    ]
    written = {
        host_paths[m["name"]]
        for m in plugin["volumeMounts"]
        if m["name"] in host_paths and not m.get("readOnly")
    }
    assert written == {"/var/lib/kubelet/device-plugins", "/var/run/cdi"}
    read_only = {
        host_paths[m["name"]] for m in plugin["volumeMounts"] if m["name"] in host_paths and m.get("readOnly")
    }
    assert read_only == {"/var/lib/kubelet/pod-resources", "/opt/kubenode/cdi-hook"}


def test_deleting_the_daemonset_leaves_no_spec_whose_hook_is_gone() -> None:
    """The plugin cannot tell a deletion from a rolling update (both a SIGTERM) and running containers need
    their entries on a restart, so no container removes the spec on stopping; what keeps it valid after
    the DaemonSet is deleted is that its hook, the bundle, lives on a hostPath the deletion keeps
    (docs/deviceplugin.md, "Upgrade, restart and uninstall")."""
    documents = {
        d["kind"]: d for d in yaml.safe_load_all((ROOT / "deploy/deviceplugin-daemonset.yaml").read_text())
    }
    pod = documents["DaemonSet"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["cdi-hook"]["hostPath"]["path"] == "/opt/kubenode/cdi-hook"
    assert all("lifecycle" not in c for c in pod["initContainers"] + pod["containers"])
    config = parse_config(yaml.safe_load(documents["ConfigMap"]["data"]["deviceplugin.yaml"]), source="cm")
    [cpu] = [r.cpu for r in config.resources if r.backend == "cpu"]
    assert cpu.cdi_hook_path is None  # the default: the bundle at /opt/kubenode/cdi-hook (hookcommand.py)
    text = (ROOT / "deploy/deviceplugin-daemonset.yaml").read_text()
    assert "kubenode-cpuset_*.json" in text and "then /opt/kubenode/cdi-hook" in text
