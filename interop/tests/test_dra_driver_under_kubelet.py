"""The DRA driver under the real kubelet: `kubenode dra-driver` registers with kubelet v1.37's plugin watcher
and publishes its ResourceSlice; kube-controller-manager makes `examples/dra/two-cores-one-numa.yaml`'s claim
from its template, kube-scheduler allocates it (examples/dra/deviceclasses.yaml), the kubelet calls
NodePrepareResources, containerd 2.4 applies the claim's CDI spec (its cpuset hook and env), and the
container's `Cpus_allowed_list` is exactly the allocated CPUs; deleting the pod unprepares the claim and
removes its spec. A second pod with a one-CPU claim shows the pinning is the claim's, not the machine's.

The tests share one node (module fixture) and run in order. Harness: harness/k8s/controlplane.py,
harness/k8s/containerd2.py, harness/k8s/kubelet.py; the driver authenticates as its node
(`system:node:<name>`, the Node authorizer), as under a DaemonSet with the node's identity.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.k8s.containerd2 import Containerd2
from harness.k8s.kubelet import (
    Kubelet,
    container_id,
    cpus_allowed_list,
    metric_sum,
    pid_env,
    wait_pod_running,
)
from harness.k8s.process import ManagedProcess
from kubenode.cpuset import parse_cpuset

ROOT = Path(__file__).resolve().parents[2]
KUBENODE = ROOT / ".venv" / "bin" / "kubenode"
EXAMPLES = ROOT / "examples" / "dra"
NODE = "kn-dra-node"
NAMESPACE = "default"
DRIVER = "cpu.kubenode.io"


@dataclass
class Node:
    control_plane: Any
    containerd: Containerd2
    kubelet: Kubelet
    driver: ManagedProcess
    times: dict[str, float]
    state: dict[str, Any]

    def wait(self, condition: Callable[[], Any], timeout: float, what: str) -> Any:
        started = time.monotonic()
        while True:
            try:
                value = condition()
                if value:
                    return value
            except Exception:
                pass
            if time.monotonic() - started > timeout:
                mentions = [line for line in self.kubelet.logs().splitlines() if "kubenode.io" in line]
                raise AssertionError(
                    f"{what}: not within {timeout:.0f} s\n--- kubelet ---\n{self.kubelet.log_tail(30)}\n"
                    f"--- kubelet on kubenode.io ---\n" + "\n".join(mentions[-30:]) + "\n"
                    f"--- driver ---\n{self.driver.log_tail(30)}\n"
                    f"--- control plane ---\n{self.control_plane.all_logs(15)}"
                )
            time.sleep(0.2)

    def driver_seconds(self, line: str) -> float:
        """Seconds from the driver's first log line to its first line containing `line` (-1: none)."""
        lines = self.driver.log().splitlines()
        stamps = [entry[:23] for entry in lines if line in entry]
        if not stamps or not lines:
            return -1.0
        fmt = "%Y-%m-%d %H:%M:%S,%f"
        return (datetime.strptime(stamps[0], fmt) - datetime.strptime(lines[0][:23], fmt)).total_seconds()

    def get(self, path: str) -> Any:
        status, body = self.control_plane.api("GET", path)
        return body if status == 200 else None


def example_manifests() -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """(DeviceClasses, the claim template, its pod as this node runs it: host network, the image built here,
    no service account token)."""
    classes = [d for d in yaml.safe_load_all((EXAMPLES / "deviceclasses.yaml").read_text()) if d]
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "two-cores-one-numa.yaml").read_text()) if d]
    template = next(d for d in docs if d["kind"] == "ResourceClaimTemplate")
    pod = next(d for d in docs if d["kind"] == "Pod")
    return classes, template, _node_pod(pod)


def _node_pod(pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"]["namespace"] = NAMESPACE
    spec = pod["spec"]
    spec.update(
        hostNetwork=True,
        automountServiceAccountToken=False,
        terminationGracePeriodSeconds=1,
        nodeSelector={"kubernetes.io/hostname": NODE},
    )
    for container in spec["containers"]:
        container["imagePullPolicy"] = "Never"
    return pod


def one_cpu_pod() -> tuple[dict[str, Any], dict[str, Any]]:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "one-cpu", "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "cpu", "exactly": {"deviceClassName": DRIVER}}]}},
    }
    pod = _node_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "one-cpu"},
            "spec": {
                "resourceClaims": [{"name": "cpu", "resourceClaimName": "one-cpu"}],
                "containers": [
                    {
                        "name": "main",
                        "image": "docker.io/library/busybox:kubenode",
                        "command": ["sh", "-c", "grep Cpus_allowed_list /proc/self/status; exec sleep 3600"],
                        "resources": {"claims": [{"name": "cpu"}]},
                    }
                ],
            },
        }
    )
    return claim, pod


@pytest.fixture(scope="module")
def node(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    work = tmp_path_factory.mktemp("dra-under-kubelet")
    times: dict[str, float] = {}
    with Containerd2() as containerd:
        kubelet = Kubelet(control_plane, containerd, NODE)
        driver: ManagedProcess | None = None
        try:
            times["kubelet_ready"] = kubelet.start()
            driver = ManagedProcess(
                "dra-driver",
                [KUBENODE, "dra-driver", "--kubeconfig", control_plane.node_kubeconfig(NODE),
                 "--node-name", NODE, "--registry-dir", kubelet.plugins_registry_dir,
                 "--plugin-dir", kubelet.plugins_dir, "--cdi-dir", containerd.cdi_dir],
                work,
            )  # fmt: skip
            driver.start()
            yield Node(control_plane, containerd, kubelet, driver, times, {})
        finally:
            for kind, name in (("pods", "two-cores-one-numa"), ("pods", "one-cpu")):
                control_plane.api(
                    "DELETE", f"/api/v1/namespaces/{NAMESPACE}/{kind}/{name}", {"gracePeriodSeconds": 0}
                )
            control_plane.wait_pods_gone(NODE)
            base = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}"
            control_plane.api("DELETE", f"{base}/resourceclaims/one-cpu")
            control_plane.api("DELETE", f"{base}/resourceclaimtemplates/two-cores-one-numa")
            if driver is not None:
                driver.stop()
            control_plane.api("DELETE", f"/api/v1/nodes/{NODE}")
            kubelet.close()
            print(f"DRA driver under kubelet: {json.dumps(times)}", file=sys.stderr)


def _slices(node: Node) -> list[dict[str, Any]]:
    body = node.get(f"/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName={NODE}")
    return [s for s in (body or {}).get("items", []) if s["spec"]["driver"] == DRIVER]


def test_driver_registers_with_the_kubelet_and_publishes_its_slice(
    node: Node, record_property: Callable[[str, object], None]
) -> None:
    node.wait(
        lambda: re.search(r'"Registered DRA plugin".*driverName="cpu\.kubenode\.io"', node.kubelet.logs()),
        60,
        "the kubelet's plugin watcher registered cpu.kubenode.io",
    )
    node.times["registered_after_driver_start"] = node.driver_seconds("registered with the kubelet")
    record_property("registered_after_driver_start_s", node.times["registered_after_driver_start"])
    slices = node.wait(lambda: _slices(node), 60, "the driver's ResourceSlice")
    (published,) = slices
    devices = {d["name"] for d in published["spec"]["devices"]}
    assert devices == {"cpu-0", "cpu-1"}, devices
    assert published["spec"]["nodeName"] == NODE
    assert (node.kubelet.plugins_registry_dir / f"{DRIVER}-reg.sock").exists()


def test_template_claim_allocated_prepared_and_pinned(
    node: Node, record_property: Callable[[str, object], None]
) -> None:
    cp = node.control_plane
    classes, template, pod = example_manifests()
    for device_class in classes:
        status, body = cp.api("POST", "/apis/resource.k8s.io/v1/deviceclasses", device_class)
        assert status in (201, 409), body
    base = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}"
    status, body = cp.api("POST", f"{base}/resourceclaimtemplates", template)
    assert status == 201, body
    status, body = cp.api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod)
    assert status == 201, body
    try:
        running, seconds = wait_pod_running(cp, NAMESPACE, "two-cores-one-numa", timeout=120)
    except (TimeoutError, RuntimeError) as exc:
        raise AssertionError(
            f"{exc}\n--- kubelet ---\n{node.kubelet.log_tail(40)}\n--- driver ---\n{node.driver.log_tail(30)}"
        ) from exc
    node.times["two_cores_pod_running"] = seconds
    record_property("time_to_running_s", node.times["two_cores_pod_running"])

    (claim_status,) = running["status"]["resourceClaimStatuses"]
    claim = node.get(f"{base}/resourceclaims/{claim_status['resourceClaimName']}")
    assert claim is not None
    # kube-controller-manager's resource-claim controller made it from the template, owned by the pod.
    owners = [(o["kind"], o["uid"]) for o in claim["metadata"].get("ownerReferences") or []]
    assert owners == [("Pod", running["metadata"]["uid"])], claim["metadata"]
    results = claim["status"]["allocation"]["devices"]["results"]
    assert {r["driver"] for r in results} == {DRIVER} and len(results) == 2
    allocated = sorted(int(r["device"].removeprefix("cpu-")) for r in results)
    reserved = [r["uid"] for r in claim["status"].get("reservedFor") or []]
    assert reserved == [running["metadata"]["uid"]]

    pid = node.containerd.container_pid(container_id(running, "main"))
    assert sorted(parse_cpuset(cpus_allowed_list(pid))) == allocated
    assert sorted(parse_cpuset(pid_env(pid)["KUBENODE_CPUSET"])) == allocated  # the spec's env edit
    spec = node.containerd.cdi_dir / f"kubenode-dra_{DRIVER}_{claim['metadata']['uid']}.json"
    assert spec.exists(), sorted(p.name for p in node.containerd.cdi_dir.iterdir())
    assert f"prepared claim {NAMESPACE}/{claim['metadata']['name']}" in node.driver.log()

    listed = node.kubelet.pod_resources_list()
    entry = next(p for p in listed["podResources"] if p["name"] == "two-cores-one-numa")
    dynamic = entry["containers"][0].get("dynamicResources") or []
    assert [d["claimName"] for d in dynamic] == [claim["metadata"]["name"]], entry

    metrics = node.kubelet.metrics()
    prepares = metric_sum(
        metrics,
        "dra_grpc_operations_duration_seconds_count",
        driver_name=DRIVER,
        method_name="/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
        grpc_status_code="OK",
    )
    assert prepares >= 1, [line for line in metrics.splitlines() if line.startswith("dra_")]
    node.state["two_cores_claim"] = (claim["metadata"]["name"], claim["metadata"]["uid"], spec)


def test_deleting_the_pod_unprepares_the_claim_and_removes_its_spec(
    node: Node, record_property: Callable[[str, object], None]
) -> None:
    name, uid, spec = node.state["two_cores_claim"]
    cp = node.control_plane
    status, body = cp.api("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/two-cores-one-numa")
    assert status == 200, body
    started = time.monotonic()
    node.wait(
        lambda: not spec.exists() and f"unprepared claim {uid}" in node.driver.log(),
        60,
        "the claim unprepared and its CDI spec removed",
    )
    node.times["pod_deleted_to_unprepared"] = time.monotonic() - started
    record_property("pod_deleted_to_unprepared_s", node.times["pod_deleted_to_unprepared"])
    base = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}"
    node.wait(
        lambda: cp.api("GET", f"{base}/resourceclaims/{name}")[0] == 404, 60, "the template's claim deleted"
    )


def test_one_cpu_claim_pins_to_exactly_that_cpu(
    node: Node, record_property: Callable[[str, object], None]
) -> None:
    cp = node.control_plane
    claim, pod = one_cpu_pod()
    status, body = cp.api("POST", f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims", claim)
    assert status == 201, body
    status, body = cp.api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod)
    assert status == 201, body
    running, seconds = wait_pod_running(cp, NAMESPACE, "one-cpu", timeout=120)
    node.times["one_cpu_pod_running"] = seconds
    record_property("one_cpu_time_to_running_s", node.times["one_cpu_pod_running"])
    allocated = node.get(f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims/one-cpu")
    (result,) = allocated["status"]["allocation"]["devices"]["results"]
    cpu = result["device"].removeprefix("cpu-")
    pid = node.containerd.container_pid(container_id(running, "main"))
    assert cpus_allowed_list(pid) == cpu


def test_restarts_keep_the_claim_and_the_restarted_driver_unprepares_it(
    node: Node, record_property: Callable[[str, object], None]
) -> None:
    """With the one-CPU pod running: the kubelet restarts (its plugin watcher registers the driver again, the
    pod keeps its container and claim), then the driver restarts (registered again; its prepared claims are
    its spec files), and deleting the pod has the restarted driver unprepare the claim."""
    cp = node.control_plane
    claim = node.get(f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims/one-cpu")
    uid = claim["metadata"]["uid"]
    spec = node.containerd.cdi_dir / f"kubenode-dra_{DRIVER}_{uid}.json"
    assert spec.exists()
    registered = re.compile(r'"Registered DRA plugin".*driverName="cpu\.kubenode\.io"')

    mark = len(node.kubelet.logs())
    started = time.monotonic()
    node.kubelet.restart()
    node.wait(lambda: registered.search(node.kubelet.logs()[mark:]), 60, "registered with the new kubelet")
    record_property("kubelet_restart_registered_s", time.monotonic() - started)
    pod = node.wait(
        lambda: (
            (p := node.get(f"/api/v1/namespaces/{NAMESPACE}/pods/one-cpu"))
            and p["status"]["phase"] == "Running"
            and p
        ),
        60,
        "the pod Running after the kubelet restart",
    )
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0

    def claim_listed() -> bool:
        entries = node.kubelet.pod_resources_list().get("podResources") or []
        entry = next((p for p in entries if p["name"] == "one-cpu"), None)
        dynamic = (entry or {}).get("containers", [{}])[0].get("dynamicResources") or []
        return [d["claimName"] for d in dynamic] == ["one-cpu"]

    node.wait(claim_listed, 60, "the claim in PodResources after the kubelet restart")

    mark = len(node.kubelet.logs())
    node.driver.stop()
    node.driver.start()
    node.wait(lambda: registered.search(node.kubelet.logs()[mark:]), 60, "the restarted driver registered")
    assert spec.exists()

    status, body = cp.api("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/one-cpu", {"gracePeriodSeconds": 0})
    assert status == 200, body
    node.wait(
        lambda: not spec.exists() and f"unprepared claim {uid}" in node.driver.log(),
        60,
        "the restarted driver unprepared the claim",
    )


def test_gpu_claim_gets_exactly_its_device_node(
    node: Node, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    """gpu.kubenode.io (a second driver process: one static 80Gi GPU, its device root a directory of the
    test's own holding only nvidia0, a char device 1:3) under the real kubelet: examples/dra/gpu-40gi.yaml's
    claim is allocated and prepared, and containerd gives the container the GPU's node and
    NVIDIA_VISIBLE_DEVICES=<uuid>."""
    dev = tmp_path / "dev"
    dev.mkdir()
    os.mknod(dev / "nvidia0", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    uuid = "GPU-00000000-kn00-0000-0000-000000000000"
    config = tmp_path / "gpu-driver.yaml"
    config.write_text(
        json.dumps(
            {
                "drivers": ["gpu.kubenode.io"],
                "gpus": [{"uuid": uuid, "memory": "80Gi", "productName": "Interop-GPU", "numaNode": 0}],
                "devRoot": str(dev),
            }
        )
    )
    kubelet = node.kubelet
    gpu_driver = ManagedProcess(
        "dra-gpu-driver",
        [KUBENODE, "dra-driver", "--kubeconfig", node.control_plane.node_kubeconfig(NODE),
         "--node-name", NODE, "--registry-dir", kubelet.plugins_registry_dir,
         "--plugin-dir", kubelet.plugins_dir, "--cdi-dir", node.containerd.cdi_dir, "--config", config],
        tmp_path,
    )  # fmt: skip
    cp = node.control_plane
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "gpu-40gi.yaml").read_text()) if d]
    template = next(d for d in docs if d["kind"] == "ResourceClaimTemplate")
    pod = _node_pod(next(d for d in docs if d["kind"] == "Pod"))
    base = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}"
    gpu_driver.start()
    try:
        node.wait(
            lambda: re.search(r'"Registered DRA plugin".*driverName="gpu\.kubenode\.io"', kubelet.logs()),
            60,
            "gpu.kubenode.io registered with the kubelet",
        )
        for device_class in example_manifests()[0]:
            status, body = cp.api("POST", "/apis/resource.k8s.io/v1/deviceclasses", device_class)
            assert status in (201, 409), body
        status, body = cp.api("POST", f"{base}/resourceclaimtemplates", template)
        assert status == 201, body
        status, body = cp.api("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod)
        assert status == 201, body
        try:
            running, seconds = wait_pod_running(cp, NAMESPACE, "gpu-40gi", timeout=60)
        except (TimeoutError, RuntimeError) as exc:
            events = cp.api("GET", f"/api/v1/namespaces/{NAMESPACE}/events")[1]
            messages = [e.get("message") for e in events.get("items", []) if "gpu-40gi" in json.dumps(e)]
            tail = gpu_driver.log_tail(20)
            raise AssertionError(f"{exc}\nevents: {messages}\n--- gpu driver ---\n{tail}") from None
        record_property("gpu_time_to_running_s", seconds)
        pid = node.containerd.container_pid(container_id(running, "main"))
        assert pid_env(pid).get("NVIDIA_VISIBLE_DEVICES") == uuid
        device = os.stat(f"/proc/{pid}/root/dev/nvidia0")
        assert stat.S_ISCHR(device.st_mode) and (os.major(device.st_rdev), os.minor(device.st_rdev)) == (1, 3)
    finally:
        cp.api("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/gpu-40gi", {"gracePeriodSeconds": 0})
        node.wait(lambda: node.get(f"/api/v1/namespaces/{NAMESPACE}/pods/gpu-40gi") is None, 60, "pod gone")
        cp.api("DELETE", f"{base}/resourceclaimtemplates/gpu-40gi")
        gpu_driver.stop()
