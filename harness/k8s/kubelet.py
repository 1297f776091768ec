"""`Kubelet`: the real kubelet v1.37 (.k8s/bin/kubelet) as a node of a `ControlPlane`, on a `Containerd2`.

    with Kubelet(control_plane, containerd, "n1") as kubelet:   # waits until the Node is Ready
        kubelet.root                # its --root-dir: pods/, plugins_registry/, plugins/, pod-resources/
        kubelet.device_plugin_dir   # <root>/device-plugins: kubelet.sock and the checkpoint
        kubelet.pod_resources_list()  # PodResources v1 List, as a dict (protobuf's JSON mapping)
        kubelet.checkpoint()          # device-plugins/kubelet_internal_checkpoint, decoded
        kubelet.restart(); kubelet.logs(); kubelet.metrics()

What is set, and why (docs/interop.md):
- The device manager's socket is a constant in kubelet 1.37,
  `/var/lib/kubelet/device-plugins/kubelet.sock` (pluginapi.KubeletSocket): `--root-dir` does not move it.
  So the kubelet runs in a mount namespace of its own (`unshare --mount --propagation slave`) in which its
  root dir is bind-mounted on /var/lib/kubelet: there the device plugin dir is <root>/device-plugins, which
  the host (and the device plugin under test) sees at that path; the host's /var/lib/kubelet stays an empty
  directory (made if missing, removed if we made it). Mounts the kubelet makes (its root dir made rshared,
  projected volumes) stay in that namespace and go with it, so test pods set
  `automountServiceAccountToken: false` (containerd, on the host, would see the volume's empty directory).
- KubeletConfiguration: `cgroupDriver: cgroupfs` (PID 1 is not systemd), `failSwapOn: false`,
  `failCgroupV1: false` (these hosts are cgroup v1 hybrids; 1.35+ refuses v1 otherwise), `oomScoreAdj: 0`
  (the kernel refuses a negative one), a unique `cgroupRoot` /kubenode-kubelet-<id> (made here in every v1
  hierarchy, cpuset's cpus and mems copied from the top, and swept with everything under it on close), webhook
  authentication and authorization with `x509.clientCAFile` the cluster CA, a serving certificate for
  127.0.0.1 signed by the cluster CA (kube-apiserver checks it with --kubelet-certificate-authority), free
  ports on 127.0.0.1, `readOnlyPort: 0`, low `evictionHard` and image GC at 100 % (a small shared disk
  must not evict the test's pods or delete its imported images), `podLogsDir` in the root dir (the default is
  /var/log/pods), `cpuManagerPolicy: none` (the static policy would write cpusets over the CDI hook's),
  `nodeStatusUpdateFrequency: 2s` (a device plugin's capacity shows on the Node within seconds).
- The kubelet sets kernel tunables at start (vm.overcommit_memory=1, kernel.panic=10,
  kernel.panic_on_oops=1, ...): `close()` writes back the values it found.
- Flags: `--hostname-override`, `--node-ip=127.0.0.1`, `--kubeconfig` (a `system:node:<name>` client
  certificate), `-v=4` (the device manager logs each GetPreferredAllocation call at 4). kubelet 1.37 refuses
  a loopback node IP for the Node's addresses ("nodeIP can't be loopback address", logged on every status
  update), so the Node has no addresses and kube-apiserver cannot reach this kubelet for logs or exec; the
  scenarios here read containers through crictl and /proc instead, and never dial the machine's own address.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import ssl
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Protocol

import grpc
from google.protobuf import json_format  # type: ignore[import-untyped]

from harness.cgroupfs import sweep_root
from harness.k8s.binaries import binary
from harness.k8s.containerd2 import Containerd2
from harness.k8s.process import ManagedProcess, free_port
from kubenode.api.podresources.v1 import api_pb2, api_pb2_grpc

CGROUP_MOUNT = Path("/sys/fs/cgroup")
HOST_KUBELET_DIR = Path("/var/lib/kubelet")
# The kernel settings kubelet 1.37 writes at start (container_manager_linux.go setupKernelTunables, with
# protectKernelDefaults false: it sets them rather than fail); put back on close.
KUBELET_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
)


class ControlPlaneLike(Protocol):
    """What the kubelet needs of harness/k8s/controlplane.py's ControlPlane."""

    ca_cert: Path
    admin_cert: Path
    admin_key: Path

    def node_kubeconfig(self, node_name: str) -> Path: ...

    def issue_cert(
        self, stem: str, common_name: str | None = ..., groups: Any = ..., server_hosts: Any = ...
    ) -> tuple[Path, Path]: ...

    def api(self, method: str, path: str, body: Any = ...) -> tuple[int, Any]: ...


def kubelet_config(
    *,
    endpoint: str,
    cgroup_root: str,
    client_ca: Path,
    cert: Path,
    key: Path,
    port: int,
    healthz_port: int,
    pod_logs_dir: Path,
) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",
        "failSwapOn": False,
        "failCgroupV1": False,
        "oomScoreAdj": 0,
        "containerRuntimeEndpoint": endpoint,
        "cgroupRoot": cgroup_root,
        "cgroupsPerQOS": True,
        "enforceNodeAllocatable": ["pods"],
        "address": "127.0.0.1",
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "tlsCertFile": str(cert),
        "tlsPrivateKeyFile": str(key),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True, "cacheTTL": "0s"},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {
            "mode": "Webhook",
            "webhook": {"cacheAuthorizedTTL": "0s", "cacheUnauthorizedTTL": "0s"},
        },
        "evictionHard": {
            "memory.available": "50Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
            "imagefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "podLogsDir": str(pod_logs_dir),
        "cpuManagerPolicy": "none",
        "topologyManagerPolicy": "none",
        "nodeStatusUpdateFrequency": "2s",
        "nodeStatusReportFrequency": "10s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
        "makeIPTablesUtilChains": False,
        "protectKernelDefaults": False,
        "resolvConf": "",
        "maxPods": 30,
        "serializeImagePulls": False,
        "registerNode": True,
    }


class Kubelet:
    def __init__(
        self,
        control_plane: ControlPlaneLike,
        containerd: Containerd2,
        node_name: str,
        *,
        verbosity: int = 4,
        extra_config: dict[str, Any] | None = None,
    ) -> None:
        self.control_plane = control_plane
        self.containerd = containerd
        self.node_name = node_name
        self.dir = Path(tempfile.mkdtemp(prefix="kubenode-kubelet-"))
        self.root = self.dir / "root"
        self.device_plugin_dir = self.root / "device-plugins"
        self.plugins_registry_dir = self.root / "plugins_registry"
        self.plugins_dir = self.root / "plugins"
        self.pod_resources_socket = self.root / "pod-resources" / "kubelet.sock"
        self.checkpoint_path = self.device_plugin_dir / "kubelet_internal_checkpoint"
        self.cgroup_root = f"/kubenode-kubelet-{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        self.healthz_port = free_port()
        self._made_host_dir = False
        self._sysctls_before = _read_sysctls()
        for directory in (self.root, self.device_plugin_dir, self.plugins_registry_dir, self.plugins_dir):
            directory.mkdir(parents=True, exist_ok=True)
        cert, key = control_plane.issue_cert(
            f"kubelet-{node_name}-serving",
            f"system:node:{node_name}",
            ["system:nodes"],
            ["127.0.0.1", node_name],
        )
        config = kubelet_config(
            endpoint=containerd.endpoint,
            cgroup_root=self.cgroup_root,
            client_ca=control_plane.ca_cert,
            cert=cert,
            key=key,
            port=self.port,
            healthz_port=self.healthz_port,
            pod_logs_dir=self.root / "pod-logs",
        )
        config.update(extra_config or {})
        self.config_path = self.dir / "kubelet-config.json"
        self.config_path.write_text(json.dumps(config, indent=2))
        kubelet_argv = [
            str(binary("kubelet")),
            f"--config={self.config_path}",
            f"--kubeconfig={control_plane.node_kubeconfig(node_name)}",
            f"--root-dir={self.root}",
            f"--hostname-override={node_name}",
            "--node-ip=127.0.0.1",
            f"-v={verbosity}",
        ]
        script = f'mount --bind "$1" {HOST_KUBELET_DIR} && shift && exec "$@"'
        argv = [
            "unshare",
            "--mount",
            "--propagation",
            "slave",
            "--",
            "sh",
            "-c",
            script,
            "sh",
            str(self.root),
        ]
        self.process = ManagedProcess("kubelet", [*argv, *kubelet_argv], self.dir / "logs")

    # -- lifecycle ---------------------------------------------------------------------------------------

    def __enter__(self) -> Kubelet:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, timeout: float = 120.0) -> float:
        """Start the kubelet and wait until its Node is Ready; seconds taken."""
        if not HOST_KUBELET_DIR.exists():
            HOST_KUBELET_DIR.mkdir(parents=True)
            self._made_host_dir = True
        self._make_cgroup_root()
        self.process.start()
        return self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 120.0) -> float:
        started = time.monotonic()
        self.process.wait_until(self.healthz, timeout, "healthy")
        self.process.wait_until(
            self.node_ready, max(1.0, timeout - (time.monotonic() - started)), "Node Ready"
        )
        return time.monotonic() - started

    def restart(self, timeout: float = 120.0) -> float:
        """SIGTERM the kubelet, start it again with the same config; seconds until healthy again."""
        self.process.stop()
        self.process.start()
        return self.process.wait_until(self.healthz, timeout, "healthy")

    def stop(self) -> None:
        self.process.stop()

    def close(self) -> None:
        """Stop the kubelet, sweep its cgroup root, remove its directory. With $KUBENODE_INTEROP_LOGS set to a
        directory, its log is copied there first (kubelet-<node>.log) for a look after the run."""
        self.process.stop()
        keep = os.environ.get("KUBENODE_INTEROP_LOGS")
        if keep:
            with contextlib.suppress(OSError):
                Path(keep).mkdir(parents=True, exist_ok=True)
                shutil.copy(self.process.log_path, Path(keep) / f"kubelet-{self.node_name}.log")
        leftover = sweep_root(self.cgroup_root)
        for name, value in self._sysctls_before.items():
            with contextlib.suppress(OSError):
                if (Path("/proc/sys") / name).read_text().strip() != value:
                    (Path("/proc/sys") / name).write_text(value)
        if self._made_host_dir:
            with contextlib.suppress(OSError):
                HOST_KUBELET_DIR.rmdir()
        shutil.rmtree(self.dir, ignore_errors=True)
        if leftover:
            raise RuntimeError(f"cgroups left under {self.cgroup_root}: {leftover}")

    def _make_cgroup_root(self) -> None:
        name = self.cgroup_root.strip("/")
        for hierarchy in sorted(CGROUP_MOUNT.iterdir()):
            if not (hierarchy / "cgroup.procs").exists():
                continue
            made = hierarchy / name
            made.mkdir(exist_ok=True)
            if (hierarchy / "cpuset.cpus").exists() and (made / "cpuset.cpus").exists():
                for knob in ("cpuset.cpus", "cpuset.mems"):
                    if not (made / knob).read_text().strip():
                        (made / knob).write_text((hierarchy / knob).read_text())

    # -- state -------------------------------------------------------------------------------------------

    def healthz(self) -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.healthz_port}/healthz", timeout=2) as response:
            return bool(response.status == 200)

    def node(self) -> dict[str, Any] | None:
        status, body = self.control_plane.api("GET", f"/api/v1/nodes/{self.node_name}")
        return body if status == 200 and isinstance(body, dict) else None

    def node_ready(self) -> bool:
        node = self.node()
        if node is None:
            return False
        conditions = node.get("status", {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def logs(self) -> str:
        return self.process.log()

    def log_tail(self, lines: int = 60) -> str:
        return self.process.log_tail(lines)

    def pod_resources_list(self, timeout: float = 5.0) -> dict[str, Any]:
        with grpc.insecure_channel(f"unix://{self.pod_resources_socket}") as channel:
            stub = api_pb2_grpc.PodResourcesListerStub(channel)
            answer = stub.List(api_pb2.ListPodResourcesRequest(), timeout=timeout)
        listed: dict[str, Any] = json_format.MessageToDict(answer)
        return listed

    def pod_resources_allocatable(self, timeout: float = 5.0) -> dict[str, Any]:
        with grpc.insecure_channel(f"unix://{self.pod_resources_socket}") as channel:
            stub = api_pb2_grpc.PodResourcesListerStub(channel)
            answer = stub.GetAllocatableResources(api_pb2.AllocatableResourcesRequest(), timeout=timeout)
        listed: dict[str, Any] = json_format.MessageToDict(answer)
        return listed

    def checkpoint(self) -> dict[str, Any]:
        """The device manager's checkpoint: {"Data": {"PodDeviceEntries": [...], "RegisteredDevices": {...}}},
        each entry's AllocResp decoded from base64 into raw bytes under "AllocRespBytes"."""
        data: dict[str, Any] = json.loads(self.checkpoint_path.read_text())
        for entry in data.get("Data", {}).get("PodDeviceEntries") or []:
            entry["AllocRespBytes"] = base64.b64decode(entry.get("AllocResp") or "")
        return data

    def metrics(self) -> str:
        """The kubelet's /metrics on its HTTPS port, as the cluster admin (a client certificate; the kubelet
        authorizes it through a SubjectAccessReview). Not through kube-apiserver's node proxy: the Node has
        no address (a loopback node IP is refused, see above)."""
        context = ssl.create_default_context(cafile=str(self.control_plane.ca_cert))
        cert, key = self.control_plane.admin_cert, self.control_plane.admin_key
        context.load_cert_chain(str(cert), str(key))
        url = f"https://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=10, context=context) as response:
            return str(response.read().decode())


def pod_phase(control_plane: ControlPlaneLike, namespace: str, name: str) -> dict[str, Any] | None:
    status, body = control_plane.api("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    return body if status == 200 and isinstance(body, dict) else None


def wait_pod_running(
    control_plane: ControlPlaneLike, namespace: str, name: str, timeout: float = 120.0
) -> tuple[dict[str, Any], float]:
    """Wait until the pod is Running with every container ready; (the pod, seconds taken). A pod that fails or
    stays Pending raises with its status."""
    started = time.monotonic()
    pod: dict[str, Any] | None = None
    while time.monotonic() - started < timeout:
        pod = pod_phase(control_plane, namespace, name)
        status = (pod or {}).get("status", {})
        if status.get("phase") in ("Failed", "Succeeded"):
            raise RuntimeError(f"pod {namespace}/{name} is {status.get('phase')}: {json.dumps(status)}")
        statuses = status.get("containerStatuses") or []
        if status.get("phase") == "Running" and statuses and all(c.get("ready") for c in statuses):
            assert pod is not None
            return pod, time.monotonic() - started
        time.sleep(0.1)
    raise TimeoutError(f"pod {namespace}/{name} not Running within {timeout:.0f} s: {json.dumps(pod)[:3000]}")


def container_id(pod: dict[str, Any], container: str) -> str:
    for status in pod["status"].get("containerStatuses") or []:
        if status["name"] == container:
            return str(status["containerID"]).split("://", 1)[1]
    raise KeyError(f"pod {pod['metadata']['name']} has no container {container} in its status")


def _read_sysctls() -> dict[str, str]:
    found = {}
    for name in KUBELET_SYSCTLS:
        with contextlib.suppress(OSError):
            found[name] = (Path("/proc/sys") / name).read_text().strip()
    return found


def metric_sum(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of metric `name` (Prometheus text) whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line[len(name) : len(name) + 1] not in ("{", " "):
            continue
        head, _, value = line.rpartition(" ")
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', head))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(value)
    return total


def pid_env(pid: int) -> dict[str, str]:
    """A process's environment (for a container's process: what the runtime gave it)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def cpus_allowed_list(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise RuntimeError(f"/proc/{pid}/status has no Cpus_allowed_list")


__all__ = ["Kubelet", "cpus_allowed_list", "kubelet_config", "metric_sum", "pid_env"]
