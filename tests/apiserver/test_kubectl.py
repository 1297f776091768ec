"""The real kubectl v1.37 against the real `kubenode apiserver` process (one server for the module).

Each test works on its own objects, so they share the server; each `Kubectl` has its own discovery cache.
"""

from __future__ import annotations

import json
import queue
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.apiserver import ApiServerProcess
from tests.apiserver.kubectl_support import Kubectl

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: {name}}}
spec:
  {node}containers:
  - name: main
    image: {image}
    env: [{{name: MODE, value: "a"}}]
  - name: side
    image: busybox:1
"""

NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{kubernetes.io/hostname: {name}, node-role.kubernetes.io/worker: ""}}
status:
  capacity: {{cpu: "4", memory: 8Gi, pods: "110"}}
  addresses: [{{type: InternalIP, address: 10.9.0.1}}]
  conditions:
  - {{type: Ready, status: "True", reason: KubeletReady, message: kubelet is posting ready status,
     lastHeartbeatTime: "2026-01-01T00:00:00Z", lastTransitionTime: "2026-01-01T00:00:00Z"}}
  nodeInfo: {{kubeletVersion: v1.37.0, osImage: Debian GNU/Linux 12, kernelVersion: 6.1.0,
             containerRuntimeVersion: "kubenode://0.1", machineID: m, systemUUID: s, bootID: b,
             kubeProxyVersion: "", operatingSystem: linux, architecture: amd64}}
"""


@pytest.fixture
def kubectl(api: ApiServerProcess, tmp_path: Path) -> Kubectl:
    return Kubectl(api.kubeconfig, tmp_path / "cache")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def pod_yaml(name: str, image: str = "nginx:1.27", node: str = "") -> str:
    return POD.format(name=name, image=image, node=f"nodeName: {node}\n  " if node else "")


def get_json(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(kubectl.out("get", *args, "-o", "json"))
    return result


def test_api_resources_lists_short_names(kubectl: Kubectl) -> None:
    out = kubectl.out("api-resources")
    # metrics.k8s.io has its own nodes and pods (NodeMetrics, PodMetrics), as with metrics-server in kube.
    metrics = [line.split() for line in out.splitlines()[1:] if "metrics.k8s.io/" in line]
    assert sorted(metrics) == [
        ["nodes", "metrics.k8s.io/v1beta1", "false", "NodeMetrics"],
        ["pods", "metrics.k8s.io/v1beta1", "true", "PodMetrics"],
    ]
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:] if "metrics.k8s.io/" not in line}
    assert rows["pods"][1:] == ["po", "v1", "true", "Pod"]
    assert rows["nodes"][1:] == ["no", "v1", "false", "Node"]
    assert rows["events"][1] == "ev" and rows["namespaces"][1] == "ns"
    assert rows["leases"][1:] == ["coordination.k8s.io/v1", "true", "Lease"]
    assert "v1.37" in kubectl.out("version")
    assert "KIND:       Pod" in kubectl.out("explain", "pods.spec.containers")


def test_apply_edit_apply_again_is_a_client_side_apply_patch(kubectl: Kubectl, tmp_path: Path) -> None:
    manifest = write(tmp_path, "web.yaml", pod_yaml("web"))
    assert kubectl.out("apply", "-f", str(manifest)).strip() == "pod/web created"
    first = get_json(kubectl, "pod", "web")
    assert "kubectl.kubernetes.io/last-applied-configuration" in first["metadata"]["annotations"]
    manifest.write_text(pod_yaml("web", image="nginx:1.28").replace("app: web", "app: web, tier: front"))
    assert kubectl.out("apply", "-f", str(manifest)).strip() == "pod/web configured"
    second = get_json(kubectl, "pod", "web")
    assert [c["image"] for c in second["spec"]["containers"]] == ["nginx:1.28", "busybox:1"]
    assert second["spec"]["containers"][0]["env"] == [{"name": "MODE", "value": "a"}]
    assert second["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert second["metadata"]["uid"] == first["metadata"]["uid"]  # patched in place, not recreated
    assert kubectl.out("apply", "-f", str(manifest)).strip() == "pod/web unchanged"


def test_edit_and_set_image_patch_the_live_pod(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.out("create", "-f", str(write(tmp_path, "p.yaml", pod_yaml("edited"))))
    editor = write(
        tmp_path, "editor.sh", "#!/bin/sh\nsed -i 's/image: busybox:1$/image: busybox:2/' \"$1\"\n"
    )
    editor.chmod(0o755)
    result = kubectl.run("edit", "pod", "edited", env={"KUBE_EDITOR": str(editor)})
    assert result.returncode == 0 and result.stdout.strip() == "pod/edited edited", result.stderr
    assert kubectl.out("set", "image", "pod/edited", "main=nginx:2").strip() == "pod/edited image updated"
    images = [c["image"] for c in get_json(kubectl, "pod", "edited")["spec"]["containers"]]
    assert images == ["nginx:2", "busybox:2"]


def test_get_pods_wide_and_show_labels(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.out("create", "-f", str(write(tmp_path, "p.yaml", pod_yaml("wide-pod", node="wide-node"))))
    lines = kubectl.out("get", "pods", "wide-pod", "-o", "wide").splitlines()
    assert lines[0].split() == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED",
        "NODE",
        "READINESS",
        "GATES",
    ]
    cells = lines[1].split()
    assert cells[:4] == ["wide-pod", "0/2", "Pending", "0"] and cells[5:] == [
        "<none>",
        "wide-node",
        "<none>",
        "<none>",
    ]
    labels = kubectl.out("get", "pods", "wide-pod", "--show-labels").splitlines()
    assert labels[0].split()[-1] == "LABELS" and labels[1].split()[-1] == "app=wide-pod"
    every = kubectl.out("get", "po", "-A").splitlines()
    assert every[0].split()[:2] == ["NAMESPACE", "NAME"] and any(
        line.split()[:2] == ["default", "wide-pod"] for line in every
    )


def test_get_pods_watch_sees_the_next_change(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.out("create", "-f", str(write(tmp_path, "p.yaml", pod_yaml("watched"))))
    proc = kubectl.popen("get", "pods", "watched", "-w")
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    stdout = proc.stdout

    def pump() -> None:
        for line in stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:

        def next_row(timeout: float = 15.0) -> str:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    line = lines.get(timeout=0.1)
                except queue.Empty:
                    continue
                if line.startswith("watched"):
                    return line
            pytest.fail(f"kubectl get -w printed no row within {timeout} s; stderr: {proc.stderr}")

        assert next_row().split()[:3] == ["watched", "0/2", "Pending"]
        kubectl.out("label", "pod", "watched", "seen=yes")
        assert next_row().split()[0] == "watched"  # the MODIFIED event, printed as a new row
    finally:
        proc.kill()
        proc.wait(10)


def test_nodes_get_describe_cordon_uncordon(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.out("create", "-f", str(write(tmp_path, "n.yaml", NODE.format(name="kn-1"))))
    lines = kubectl.out("get", "nodes", "kn-1").splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert lines[1].split()[:3] == ["kn-1", "Ready", "worker"] and lines[1].split()[-1] == "v1.37.0"
    wide = kubectl.out("get", "no", "kn-1", "-o", "wide").splitlines()[1]
    assert "10.9.0.1" in wide and "Debian GNU/Linux 12" in wide and "kubenode://0.1" in wide
    assert kubectl.out("cordon", "kn-1").strip() == "node/kn-1 cordoned"
    assert kubectl.out("get", "nodes", "kn-1").splitlines()[1].split()[1] == "Ready,SchedulingDisabled"
    assert kubectl.out("uncordon", "kn-1").strip() == "node/kn-1 uncordoned"
    assert "unschedulable" not in get_json(kubectl, "node", "kn-1")["spec"]
    kubectl.out("create", "-f", str(write(tmp_path, "p.yaml", pod_yaml("on-kn-1", node="kn-1"))))
    described = kubectl.out("describe", "node", "kn-1")
    for text in (
        "Name:               kn-1",
        "Roles:              worker",
        "Kubelet Version:",
        "on-kn-1",
        "Events:",
    ):
        assert text in described, text


def test_describe_pod_shows_its_events(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.out("create", "-f", str(write(tmp_path, "p.yaml", pod_yaml("described"))))
    uid = get_json(kubectl, "pod", "described")["metadata"]["uid"]
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "described.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "described", "namespace": "default", "uid": uid},
        "reason": "Scheduled",
        "message": "Successfully assigned default/described to n1",
        "type": "Normal",
        "source": {"component": "default-scheduler"},
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "count": 1,
    }
    kubectl.out("create", "-f", str(write(tmp_path, "e.json", json.dumps(event))))
    described = kubectl.out("describe", "pod", "described")
    assert re.search(r"^Name:\s+described$", described, re.M) and "Containers:" in described
    assert "Successfully assigned default/described to n1" in described
    events = kubectl.out("get", "events").splitlines()
    assert events[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert any("pod/described" in line and "Scheduled" in line for line in events[1:])


def test_label_and_annotate(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.out("create", "-f", str(write(tmp_path, "p.yaml", pod_yaml("tagged"))))
    assert kubectl.out("label", "pod", "tagged", "env=prod").strip() == "pod/tagged labeled"
    assert kubectl.out("annotate", "pod", "tagged", "owner=team-a").strip() == "pod/tagged annotated"
    meta = get_json(kubectl, "pod", "tagged")["metadata"]
    assert meta["labels"]["env"] == "prod" and meta["annotations"]["owner"] == "team-a"
    kubectl.out("label", "pod", "tagged", "env-")
    assert "env" not in get_json(kubectl, "pod", "tagged")["metadata"]["labels"]
    assert kubectl.out("get", "pods", "-l", "app=tagged", "-o", "name").strip() == "pod/tagged"


def test_delete_pod_with_grace_period(kubectl: Kubectl, tmp_path: Path) -> None:
    # Unbound: the server deletes at once, and kubectl's --wait (a WatchList watch) returns.
    kubectl.out("create", "-f", str(write(tmp_path, "a.yaml", pod_yaml("gone"))))
    assert "deleted" in kubectl.out("delete", "pod", "gone", "--grace-period=5")
    assert kubectl.run("get", "pod", "gone", check=False).returncode == 1
    # Bound: only deletionTimestamp, until the node deletes it with grace 0.
    kubectl.out("create", "-f", str(write(tmp_path, "b.yaml", pod_yaml("draining", node="some-node"))))
    kubectl.out("delete", "pod", "draining", "--grace-period=5", "--wait=false")
    meta = get_json(kubectl, "pod", "draining")["metadata"]
    assert meta["deletionGracePeriodSeconds"] == 5 and meta["deletionTimestamp"]
    assert kubectl.out("get", "pod", "draining").splitlines()[1].split()[2] == "Terminating"
    kubectl.out("delete", "pod", "draining", "--grace-period=0", "--force")
    assert kubectl.run("get", "pod", "draining", check=False).returncode == 1


def test_get_lease_in_kube_node_lease(kubectl: Kubectl, tmp_path: Path) -> None:
    lease = """\
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: lease-node, namespace: kube-node-lease}
spec: {holderIdentity: lease-node, leaseDurationSeconds: 40, renewTime: "2026-01-01T00:00:00.000000Z"}
"""
    kubectl.out("create", "-f", str(write(tmp_path, "l.yaml", lease)))
    lines = kubectl.out("get", "lease", "-n", "kube-node-lease").splitlines()
    assert lines[0].split() == ["NAME", "HOLDER", "AGE"]
    assert any(line.split()[:2] == ["lease-node", "lease-node"] for line in lines[1:])


def test_create_invalid_pod_shows_the_422_message(kubectl: Kubectl, tmp_path: Path) -> None:
    bad = pod_yaml("bad-cpu").replace("    env:", '    resources: {limits: {cpu: "-1"}}\n    env:')
    result = kubectl.run("create", "-f", str(write(tmp_path, "bad.yaml", bad)), check=False)
    assert result.returncode == 1
    assert (
        'The Pod "bad-cpu" is invalid: spec.containers[0].resources.limits[cpu]: Invalid value: "-1"'
        in result.stderr
    )
    unknown = pod_yaml("bad-field").replace("spec:", "spec:\n  bogusField: 1")
    result = kubectl.run("create", "-f", str(write(tmp_path, "unknown.yaml", unknown)), check=False)
    assert result.returncode == 1 and "bogusField" in result.stderr


LIST = """\
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {name: listed-1}, spec: {containers: [{name: c, image: busybox,
   resources: {limits: {cpu: 1}}, ports: [{containerPort: 80}]}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: listed-2}, spec: {containers: [{name: c, image: busybox}]}}
"""


def test_create_a_list_validates_against_openapi_v2_protobuf(kubectl: Kubectl, tmp_path: Path) -> None:
    """kubectl validates a `kind: List` on the client, with the protobuf /openapi/v2 models."""
    bad = LIST.replace("metadata: {name: listed-2}", "metadata: {name: listed-2}, bogus: 1")
    result = kubectl.run("create", "-f", str(write(tmp_path, "bad.yaml", bad)), check=False)
    assert result.returncode == 1
    assert 'ValidationError(Pod): unknown field "bogus" in io.k8s.api.core.v1.Pod' in result.stderr
    out = kubectl.out("apply", "-f", str(write(tmp_path, "list.yaml", LIST)))
    assert out.split("\n")[:2] == ["pod/listed-1 created", "pod/listed-2 created"]
    assert "RESOURCE: spec <Object>" in kubectl.out("explain", "pods.spec", "--output=plaintext-openapiv2")


def test_a_call_without_a_token_is_refused(api: ApiServerProcess, tmp_path: Path) -> None:
    text = api.kubeconfig.read_text()
    token = api.token
    no_token = write(tmp_path, "kubeconfig", text.replace(f"token: {token}", "token: not-a-valid-token"))
    result = Kubectl(no_token, tmp_path / "cache").run("get", "pods", check=False)
    assert result.returncode == 1
    assert "You must be logged in to the server" in result.stderr


def test_a_node_user_gets_kubes_forbidden_message(
    api: ApiServerProcess, tmp_path: Path, kubectl: Kubectl
) -> None:
    kubectl.out("create", "-f", str(write(tmp_path, "p.yaml", pod_yaml("guarded"))))
    node = Kubectl(api.kubeconfig_for("system:node:kn-9", ["system:nodes"]), tmp_path / "node-cache")
    result = node.run("label", "pod", "guarded", "x=y", check=False)
    assert result.returncode == 1
    assert (
        'pods "guarded" is forbidden: User "system:node:kn-9" cannot patch resource "pods" in API group "" '
        'in the namespace "default"'
    ) in result.stderr
    assert "guarded" in node.out("get", "pods")  # reading is allowed
    # auth can-i (SelfSubjectAccessReview, sent as protobuf) and auth whoami (SelfSubjectReview)
    assert node.run("auth", "can-i", "update", "pods", check=False).stdout.strip() == "no"
    assert node.out("auth", "can-i", "patch", "pods", "--subresource=status").strip() == "yes"
    assert node.out("auth", "can-i", "update", "leases", "-n", "kube-node-lease").strip() == "yes"
    assert "system:node:kn-9" in node.out("auth", "whoami")
    rules = {
        line.split()[0]: line.split()[-1]
        for line in node.out("auth", "can-i", "--list", "-n", "kube-node-lease").splitlines()[1:]
        if not line.startswith(" ")
    }
    assert rules["pods/status"] == "update]" and "leases.coordination.k8s.io" in rules


def test_typed_client_writes_in_protobuf(kubectl: Kubectl, tmp_path: Path) -> None:
    """kubectl create namespace and typed deletes send protobuf bodies, with no JSON fallback."""
    assert kubectl.out("create", "namespace", "typed-ns").strip() == "namespace/typed-ns created"
    assert (
        kubectl.out("create", "namespace", "dry-ns", "--dry-run=server", "-o", "name").strip()
        == "namespace/dry-ns"
    )
    assert kubectl.run("get", "namespace", "dry-ns", check=False).returncode == 1
    kubectl.out("create", "-f", str(write(tmp_path, "n.yaml", NODE.format(name="kn-drain"))))
    # drain evicts with a protobuf Eviction; with --disable-eviction it deletes with a protobuf DeleteOptions.
    for name, grace, extra in (("evicted", 9, ()), ("drained", 7, ("--disable-eviction",))):
        kubectl.out("create", "-f", str(write(tmp_path, f"{name}.yaml", pod_yaml(name, node="kn-drain"))))
        drain_with_a_stand_in_kubelet(kubectl, name, grace, extra)


def drain_with_a_stand_in_kubelet(kubectl: Kubectl, pod: str, grace: int, extra: tuple[str, ...]) -> None:
    drain = kubectl.popen("drain", "kn-drain", "--force", f"--grace-period={grace}", "--timeout=30s", *extra)
    try:
        deadline = time.monotonic() + 20
        while get_json(kubectl, "pod", pod)["metadata"].get("deletionGracePeriodSeconds") != grace:
            assert time.monotonic() < deadline, (
                f"drain's protobuf body did not reach {pod} with grace {grace}"
            )
            time.sleep(0.1)
        kubectl.out("delete", "pod", pod, "--grace-period=0", "--force")  # what the kubelet would do
        assert drain.wait(30) == 0
    finally:
        drain.kill()
        drain.wait(10)


def test_component_kubeconfigs_written_beside_the_admin_one(api: ApiServerProcess, tmp_path: Path) -> None:
    scheduler = Kubectl(api.data_dir / "scheduler.kubeconfig", tmp_path / "s-cache")
    assert "system:kube-scheduler" in scheduler.out("auth", "whoami")
    assert scheduler.out("auth", "can-i", "create", "pods", "--subresource=binding").strip() == "yes"
    controllers = Kubectl(api.data_dir / "controller-manager.kubeconfig", tmp_path / "c-cache")
    assert "system:kube-controller-manager" in controllers.out("auth", "whoami")
    assert controllers.out("auth", "can-i", "patch", "nodes").strip() == "yes"
    # kube's role lets it create secrets (the tokens controller), not RBAC objects
    assert controllers.run("auth", "can-i", "create", "clusterroles", check=False).stdout.strip() == "no"
    nodes = sorted(api.data_dir.glob("node-*.kubeconfig"))
    assert len(nodes) == 1  # the local node's
    node = Kubectl(nodes[0], tmp_path / "n-cache")
    assert f"system:node:{nodes[0].name[5:-11]}" in node.out("auth", "whoami")


def test_kubectl_run_without_a_pod_controller(kubectl: Kubectl) -> None:
    """`kubectl run` creates a bare pod (no kinds beyond pods needed)."""
    assert (
        kubectl.out("run", "runner", "--image=busybox:1", "--restart=Never").strip() == "pod/runner created"
    )
    assert get_json(kubectl, "pod", "runner")["spec"]["restartPolicy"] == "Never"
