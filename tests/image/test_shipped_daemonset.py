"""The project's device plugin DaemonSet on its own cluster: `kubenode up --container-runtime-endpoint` on a
private containerd, the image `make image` builds imported into it (no registry), and `kubectl apply` of
deploy/deviceplugin-daemonset.yaml. The DaemonSet controller makes the plugin's pod on the node, the agent
starts it through CRI with the manifest's init container, securityContext and mounts, the plugin registers
with the agent's device manager, and its `kubenode.io/cpu` reaches the Node's allocatable.

The manifest is applied as shipped but for three things a test must change: the image (the tag built
here), and the host paths, each bound from a directory of this cluster (the agent's device-plugin
directory for the kubelet's, scratch directories for the CDI ones) so nothing is written to the machine's
/var/run/cdi or /opt. `up`'s own plugin serves only a marker resource, so the CPUs come from the DaemonSet.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.containerd import ContainerdProcess
from harness.ociimage import ctr_import_args
from kubenode.kubeclient import NODES, PODS
from tests.agent.support import require_cgroup_v1
from tests.agent_cluster.support import wait_until
from tests.cri import conftest as cri_fixtures
from tests.image.conftest import Image
from tests.up.support import UpProcess

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "deviceplugin-daemonset.yaml"
RESOURCE = "kubenode.io/cpu"
MARKER = "example.com/up-marker"
UP_PLUGIN_CONFIG = f"""version: v1
resources:
  - name: {MARKER}
    backend: static
    static:
      devices:
        - id: marker-0
          deviceNodes:
            - {{hostPath: /dev/null, containerPath: /dev/marker0, permissions: rw}}
"""

pytestmark = pytest.mark.timeout(900)


containerd = cri_fixtures.containerd  # the CRI tests' private containerd, for this package here


def import_into(containerd: ContainerdProcess, image: Image, scratch: Path) -> None:
    archive = scratch / "image.tar"
    image.podman.run("save", "--format", "oci-archive", "-o", str(archive), image.tag)
    address = containerd.endpoint.removeprefix("unix://")
    done = subprocess.run(
        [*ctr_import_args(address), str(archive)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def shipped_documents(image: Image, host: dict[str, Path]) -> list[dict[str, Any]]:
    documents = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    [daemonset] = [d for d in documents if d["kind"] == "DaemonSet"]
    spec = daemonset["spec"]["template"]["spec"]
    for container in spec["containers"] + spec.get("initContainers", []):
        container["image"] = image.tag
    for volume in spec["volumes"]:
        if "hostPath" in volume:
            volume["hostPath"]["path"] = str(host[volume["hostPath"]["path"]])
    return documents


def allocatable(up: UpProcess) -> dict[str, str]:
    [node] = up.client.list(NODES)["items"]
    found: dict[str, str] = node["status"].get("allocatable") or {}
    return found


def test_the_shipped_plugin_daemonset_registers_its_cpus(containerd: ContainerdProcess, image: Image) -> None:
    require_cgroup_v1()
    with tempfile.TemporaryDirectory(prefix="kn-shipped-ds-") as tmp:
        scratch = Path(tmp)
        import_into(containerd, image, scratch)
        (scratch / "pods").mkdir()
        plugin_config = scratch / "up-plugins.yaml"
        plugin_config.write_text(UP_PLUGIN_CONFIG)
        endpoint = containerd.endpoint
        with UpProcess(scratch / "pods", "--container-runtime-endpoint", endpoint, "--plugin-config",
                       str(plugin_config), start_deadline=240) as up:  # fmt: skip
            assert RESOURCE not in allocatable(up) and MARKER in allocatable(up)
            host = {
                "/var/lib/kubelet/device-plugins": up.data_dir / "device-plugins",
                "/var/lib/kubelet/pod-resources": scratch / "pod-resources",
                "/var/run/cdi": scratch / "cdi",
                "/opt/kubenode/cdi-hook": scratch / "cdi-hook",
            }
            manifest = scratch / "deviceplugin.yaml"
            manifest.write_text(yaml.safe_dump_all(shipped_documents(image, host)))
            rc, _, err = up.kubectl("apply", "-f", str(manifest))
            assert rc == 0, err

            def plugin_pod() -> dict[str, Any] | None:
                pods = up.client.list(
                    PODS, "kube-system", label_selector="app.kubernetes.io/name=kubenode-deviceplugin"
                )
                items = pods["items"]
                return items[0] if items and items[0]["status"].get("phase") == "Running" else None

            pod = wait_until(plugin_pod, 240, "the plugin DaemonSet's pod Running")
            assert pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
            [status] = pod["status"]["containerStatuses"]
            assert status["containerID"].startswith("containerd://")
            cpus = wait_until(lambda: allocatable(up).get(RESOURCE, "0") not in ("0", ""), 120,
                              f"{RESOURCE} in the Node's allocatable")  # fmt: skip
            assert cpus
            assert (host["/opt/kubenode/cdi-hook"] / "hook.json").is_file()  # the init container ran
            rc, _, err = up.kubectl("delete", "-f", str(manifest), "--timeout=120s")
            assert rc == 0, err
