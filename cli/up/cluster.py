"""The one-machine cluster of `kubenode up`: five supervised `kubenode` processes, started in order.

    apiserver  -> ready when /readyz answers (its admin, scheduler and node kubeconfigs are written);
    agent      -> started when its Node reports Ready=True in the API (not yet "Ready" in the output);
    deviceplugin (CPU backend; the NVML GPU backend when NVML finds GPUs, else the static demo GPU)
               -> ready when its resources are in the Node's capacity and allocatable;
    dra-driver (kubenode's DRA drivers: cpu.kubenode.io, gpu.kubenode.io where NVML finds GPUs)
               -> ready when its registration sockets are in the agent's plugins registry directory;
    scheduler  -> ready when it holds the leader Lease (kube-system/kubenode-scheduler);
    controller-manager (node lifecycle: conditions -> NoSchedule taints; and the workload controllers:
               garbage collector, ReplicaSet, Deployment, DaemonSet, Job, ServiceAccount)
               -> ready when it holds its Lease (kube-system/kube-controller-manager);
    node       -> "Ready" only now, read back from the API: Ready=True and every kubenode.io/* resource
                  a plugin was started for, non-zero in capacity and allocatable (what `kubectl describe
                  node` shows), so the word never comes before the node can take the example pods.

`stop()` goes in reverse: the controller manager, the scheduler, the DRA driver, the agent, then `kubenode
agent drain` on the agent's state (every pod's processes, cgroups and the cgroup root go), the device
plugin, the API server.
Everything lives under the data directory: `apiserver/` (its database and kubeconfigs), `agent/`,
`device-plugins/`, `plugins_registry/`, `plugins/`, `cdi/`, `features.d/`, `logs/<component>.log`,
`up/<component>.pid`.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cli import cgroupview
from cli.up.process import Child, end_leftovers
from kubenode import yamlload
from kubenode.kubeclient import LEASES, NODES, KubeClient, KubeError, NotFound, load_kubeconfig
from kubenode.kubeclient.timefmt import parse_time

SCHEDULER_LEASE = ("kube-system", "kubenode-scheduler")
CONTROLLER_MANAGER_LEASE = ("kube-system", "kube-controller-manager")
READY_TIMEOUT_S = 60.0
# The agent's status loop, faster than the kubelet's 10 s so that the plugin's resources reach
# allocatable within a couple of seconds of registering; everything else keeps the kubelet's defaults.
AGENT_SETTINGS = {"nodeStatusUpdateFrequency": 2.0, "podStatusResyncInterval": 5.0}


class StartError(Exception):
    """A component did not become ready; the message names it and ends with its log's tail."""


@dataclass
class Options:
    data_dir: Path
    cgroup_root: str
    port: int
    plugin_config: Path | None
    container_runtime_endpoint: str = ""  # the agent's CRI runtime (docs/runtime.md); "" = process pods only


@dataclass
class Cluster:
    options: Options
    progress: Callable[[str], None]
    children: list[Child] = field(default_factory=list)
    node: str = ""
    client: KubeClient | None = None
    # The GPU plugin's /metrics (dcgm-exporter's per-pod series) for the table; "" when no gpu backend runs.
    gpu_metrics_url: str = ""
    # Set by SIGINT/SIGTERM: a start still waiting for a component gives up (then everything is stopped).
    interrupted: threading.Event = field(default_factory=threading.Event)

    # -- layout ----------------------------------------------------------------------------------------

    @property
    def apiserver_dir(self) -> Path:
        return self.options.data_dir / "apiserver"

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig `up` hands to the user (`export KUBECONFIG=...`)."""
        return self.options.data_dir / "kubeconfig"

    @property
    def features_dir(self) -> Path:
        """The agent's nodeFeaturesDir: NFD feature files (the gpu plugin's GFD labels) become Node labels."""
        return self.options.data_dir / "features.d"

    @property
    def agent_config(self) -> Path:
        return self.options.data_dir / "agent.yaml"

    def _dirs(self) -> tuple[Path, Path]:
        run_dir = self.options.data_dir / "up"
        log_dir = self.options.data_dir / "logs"
        for directory in (run_dir, log_dir, self.options.data_dir / "device-plugins"):
            directory.mkdir(parents=True, exist_ok=True)
        return run_dir, log_dir

    def _child(self, name: str, args: list[str]) -> Child:
        run_dir, log_dir = self._dirs()
        child = Child(name, args, run_dir, log_dir)
        child.start()
        self.children.append(child)
        return child

    # -- start ------------------------------------------------------------------------------------------

    def adopt_leftovers(self) -> None:
        """After a crash: end the daemons the crashed run left (the pods stay; the new agent adopts them)."""
        run_dir, _ = self._dirs()
        ended = end_leftovers(run_dir, str(self.options.data_dir))
        if ended:
            self.progress(f"ended what a previous run left running: {', '.join(ended)}")

    def start(self) -> None:
        self.adopt_leftovers()
        self._start_apiserver()
        # The agent before the plugin, as on a node where the kubelet runs first: a plugin that started
        # earlier has its socket removed by the device manager's start and serves again, but then its
        # devices never reached the device manager here (seen 2026-11-22; cli/up works around it).
        self._start_agent()
        resources = self._start_device_plugin()
        self._start_dra_driver()
        self._start_scheduler()
        self._start_controller_manager()
        self._confirm_node_ready(resources)

    def _wait(
        self, child: Child, what: str, ready: Callable[[], Any], timeout: float = READY_TIMEOUT_S
    ) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(KubeError, OSError, ValueError):
                value = ready()
                if value:
                    return value
            if self.interrupted.is_set():
                raise StartError(f"interrupted while waiting for {child.name}'s {what}")
            if child.exited() is not None:
                raise StartError(f"{child.name} exited with {child.exited()} before {what}:\n{child.tail()}")
            if time.monotonic() >= deadline:
                raise StartError(f"{child.name}: no {what} within {timeout:.0f} s:\n{child.tail()}")
            time.sleep(0.1)

    def _start_apiserver(self) -> None:
        began = time.monotonic()
        # Written by the server at every start (the URL may change); remove it so it is not read stale.
        with contextlib.suppress(OSError):
            self.kubeconfig.unlink()
        child = self._child(
            "apiserver",
            ["apiserver", "--data-dir", str(self.apiserver_dir), "--bind-address", "127.0.0.1",
             "--port", str(self.options.port), "--write-kubeconfig", str(self.kubeconfig)],
        )  # fmt: skip
        self._wait(child, "kubeconfig", self.kubeconfig.exists)
        config = load_kubeconfig(self.kubeconfig)
        ca = self.apiserver_dir / "pki" / "ca.crt"
        context = ssl.create_default_context(cafile=str(ca))

        def ready() -> bool:
            with urllib.request.urlopen(config.host + "/readyz", timeout=2, context=context) as answer:
                return bool(answer.status == 200)

        self._wait(child, "/readyz", ready)
        self.client = KubeClient(config)
        self.progress(f"apiserver    ready in {time.monotonic() - began:4.1f} s  {config.host}")
        # A previous run's scheduler is gone (this run holds the data dir's lock), but its Lease would make
        # the new one wait out the lease duration (15 s) before it may lead: drop it.
        for namespace, name in (SCHEDULER_LEASE, CONTROLLER_MANAGER_LEASE):
            with contextlib.suppress(NotFound):
                self.client.delete(LEASES, name, namespace)

    def _start_device_plugin(self) -> list[str]:
        began = time.monotonic()
        config = self.options.plugin_config or self._default_plugin_config()
        args = ["deviceplugin", "--config", str(config),
                "--kubelet-dir", str(self.options.data_dir / "device-plugins")]  # fmt: skip
        if has_gpu_backend(config):
            # Loopback only: the table's one scrape per refresh is the sole reader.
            port = free_loopback_port()
            args += ["--metrics-bind-address", f"127.0.0.1:{port}"]
            self.gpu_metrics_url = f"http://127.0.0.1:{port}/metrics"
        plugin = self._child("deviceplugin", args)
        assert self.client is not None
        client = self.client
        wanted = plugin_resources(config)

        resources = self._wait(
            plugin,
            "resources in the node's capacity and allocatable",
            lambda: advertised(client.get(NODES, self.node), wanted),
        )
        shown = " ".join(f"{name}={count}" for name, count in resources.items())
        if self.gpu_metrics_url:
            shown += f"  metrics {self.gpu_metrics_url}"
        self.progress(f"deviceplugin ready in {time.monotonic() - began:4.1f} s  {shown}")
        return wanted

    def _start_dra_driver(self) -> None:
        """kubenode's DRA drivers beside the device plugin: ready once the agent has registered them (their
        registration sockets are in the agent's plugins registry directory)."""
        began = time.monotonic()
        registry = self.options.data_dir / "plugins_registry"
        driver = self._child(
            "dra-driver",
            ["dra-driver", "--kubeconfig", str(self._node_kubeconfig()), "--node-name", self.node,
             "--registry-dir", str(registry), "--plugin-dir", str(self.options.data_dir / "plugins"),
             "--cdi-dir", str(self.options.data_dir / "cdi")],
        )  # fmt: skip
        sockets = self._wait(
            driver, "registration sockets", lambda: sorted(p.name for p in registry.glob("*.sock"))
        )
        shown = " ".join(name.removesuffix("-reg.sock") for name in sockets)
        self.progress(f"dra-driver   ready in {time.monotonic() - began:4.1f} s  {shown}")

    def _confirm_node_ready(self, wanted: list[str]) -> None:
        """The one "Ready" line: the Node as the API shows it now, with every plugin resource on it."""
        assert self.client is not None
        client = self.client
        [agent] = [c for c in self.children if c.name == "agent"]

        def ready() -> dict[str, str]:
            node = client.get(NODES, self.node)
            return advertised(node, wanted) if node_ready(node) else {}

        resources = self._wait(agent, f"Ready node {self.node} with {', '.join(wanted)}", ready)
        shown = " ".join(f"{name}={count}" for name, count in resources.items())
        self.progress(f"node         {self.node} Ready  {shown}")

    def _default_plugin_config(self) -> Path:
        """The CPU backend and a GPU: NVML's when it finds GPUs, else examples/up-plugins.yaml's demo GPU."""
        document = yaml.safe_load(example("up-plugins.yaml").read_text())
        for resource in document["resources"]:
            if resource.get("backend") == "cpu":
                # Not the host's /var/run/cdi: the agent pins by KUBENODE_CPUSET, and a spec left there would
                # name this checkout's hook to the host's runtimes after the data dir or checkout is gone.
                resource.setdefault("cpu", {})["cdiSpecDir"] = str(self.options.data_dir / "cdi")
        if nvml_gpu_count() > 0:
            document["resources"] = [r for r in document["resources"] if r.get("backend") != "static"]
            # Named as the demo GPU is, so examples/pods/gpu-job.yaml runs on real GPUs unchanged.
            # The agent's PodResources socket (per-pod metrics for the table's GPU columns) and its feature
            # files directory (GFD labels on the Node), both in the data dir.
            gpu = {
                "idStrategy": "uuid",
                "podResourcesSocket": str(self.options.data_dir / "device-plugins" / "pod-resources.sock"),
                "featuresFile": str(self.features_dir / "kubenode-gfd"),
            }
            document["resources"].append({"name": "kubenode.io/gpu", "backend": "gpu", "gpu": gpu})
        path = self.options.data_dir / "plugins.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        return path

    def _node_kubeconfig(self) -> Path:
        found = sorted(self.apiserver_dir.glob("node-*.kubeconfig"))
        if not found:
            raise StartError(f"apiserver wrote no node kubeconfig in {self.apiserver_dir}")
        return found[0]

    def _start_agent(self) -> None:
        began = time.monotonic()
        from kubenode.hostnet import host_ip

        kubeconfig = self._node_kubeconfig()
        self.node = kubeconfig.name.removeprefix("node-").removesuffix(".kubeconfig")
        manifests = self.options.data_dir / "manifests"
        manifests.mkdir(exist_ok=True)
        self.features_dir.mkdir(exist_ok=True)
        settings = {
            "nodeName": self.node,
            "manifests": str(manifests),
            "stateDir": str(self.options.data_dir / "agent"),
            "cgroupRoot": self.options.cgroup_root,
            "devicePluginDir": str(self.options.data_dir / "device-plugins"),
            "pluginsRegistryDir": str(self.options.data_dir / "plugins_registry"),
            # The host's CDI directories and the data dir's, where the DRA driver writes its claims' specs:
            # the agent resolves its process pods' CDI IDs there, as containerd does in its own.
            "cdiSpecDirs": ["/etc/cdi", "/var/run/cdi", str(self.options.data_dir / "cdi")],
            # Not the host's NFD directory: the labels are this cluster's plugins' (a --plugin-config's
            # featuresFile goes here too, as tools/device_proof.sh's does).
            "nodeFeaturesDir": str(self.features_dir),
            # The address the Node reports as InternalIP, where the API server and `kubenode trace` look
            # for the agent (daemonEndpoints names the port, any free one).
            "listen": f"{host_ip()}:0",
            **AGENT_SETTINGS,
        }
        if self.options.container_runtime_endpoint:
            settings["containerRuntimeEndpoint"] = self.options.container_runtime_endpoint
            settings["podLogsDir"] = str(self.options.data_dir / "pod-logs")
        self.agent_config.write_text(yaml.safe_dump(settings, sort_keys=False))
        child = self._child(
            "agent", ["agent", "--kubeconfig", str(kubeconfig), "--config", str(self.agent_config)]
        )
        assert self.client is not None
        client = self.client
        # Fresh: after a restart the Node still says Ready from the last run until its agent reports again.
        since = time.time() - 1
        self._wait(child, f"Ready node {self.node}", lambda: node_ready(client.get(NODES, self.node), since))
        # Not "Ready" yet: that line comes once the plugins' resources are on the Node too.
        self.progress(
            f"agent        started in {time.monotonic() - began:4.1f} s  node {self.node} registered"
        )

    def _start_scheduler(self) -> None:
        began = time.monotonic()
        child = self._child(
            "scheduler",
            ["scheduler", "run", "--kubeconfig", str(self.apiserver_dir / "scheduler.kubeconfig"),
             "--leader-elect"],
        )  # fmt: skip
        holder = self._wait(child, "leader lease", self._lease_holder(SCHEDULER_LEASE))
        self.progress(f"scheduler    ready in {time.monotonic() - began:4.1f} s  leader {holder}")

    def _start_controller_manager(self) -> None:
        began = time.monotonic()
        kubeconfig = self.apiserver_dir / "controller-manager.kubeconfig"
        child = self._child("controller-manager", ["controller-manager", "--kubeconfig", str(kubeconfig)])
        holder = self._wait(child, "leader lease", self._lease_holder(CONTROLLER_MANAGER_LEASE))
        self.progress(f"controllers  ready in {time.monotonic() - began:4.1f} s  leader {holder}")

    def _lease_holder(self, lease: tuple[str, str]) -> Callable[[], str]:
        assert self.client is not None
        client = self.client
        namespace, name = lease
        since = time.time() - 1

        def holder() -> str:
            # Renewed since it started: after a crash the Lease names the dead process until it expires.
            spec = client.get(LEASES, name, namespace).get("spec") or {}
            renewed = spec.get("renewTime")
            fresh = bool(renewed) and parse_time(str(renewed)) >= since
            return str(spec.get("holderIdentity") or "") if fresh else ""

        return holder

    # -- watch and stop ---------------------------------------------------------------------------------

    def dead(self) -> list[Child]:
        return [c for c in self.children if c.exited() is not None]

    def stop(self) -> None:
        """Reverse order; the agent's pods are drained (processes, cgroups, records) once it has stopped."""
        if self.client is not None:
            self.client.close()
            self.client = None
        for child in reversed(self.children):
            began = time.monotonic()
            status = child.stop()
            self.progress(f"{child.name:<12} stopped in {time.monotonic() - began:4.1f} s (exit {status})")
            if child.name == "agent":
                self._drain()
        self.children.clear()

    def _drain(self) -> None:
        began = time.monotonic()
        _, log_dir = self._dirs()
        with (log_dir / "drain.log").open("ab") as log:
            status = subprocess.call(
                [sys.executable, "-m", "cli.main", "agent", "drain", "--config", str(self.agent_config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        took = time.monotonic() - began
        if status == 0:
            self.progress(f"pods         drained in {took:4.1f} s: processes and cgroups removed")
            return
        # The drain failed (see drain.log): the blunt tool, so that no pod outlives `up` whatever happened.
        from kubenode.cgroupsweep import sweep_v1_root, sweep_v2_root

        sweep = sweep_v2_root if cgroupview.is_v2() else sweep_v1_root
        left = sweep(self.options.cgroup_root)
        self.progress(
            f"pods         drain failed (exit {status}, {log_dir / 'drain.log'}); cgroup root swept:"
            f" every process killed" + (f", left: {', '.join(left)}" if left else ", nothing left")
        )


def advertised(node: dict[str, Any], wanted: list[str]) -> dict[str, str]:
    """{resource: allocatable} when every wanted resource is non-zero in both capacity and allocatable."""
    status = node.get("status") or {}
    capacity, allocatable = status.get("capacity") or {}, status.get("allocatable") or {}
    found = {name: str(allocatable[name]) for name in wanted if name in allocatable and name in capacity}
    complete = len(found) == len(wanted) and all(
        str(capacity[name]) != "0" and found[name] != "0" for name in wanted
    )
    return found if complete else {}


def node_ready(node: dict[str, Any], since: float = 0.0) -> bool:
    """Ready=True, with a heartbeat at `since` (unix seconds) or later."""
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") == "True":
            beat = c.get("lastHeartbeatTime")
            return bool(beat) and parse_time(beat) >= int(since)
    return False


def plugin_resources(config: Path) -> list[str]:
    document = yamlload.load(config.read_text()) or {}
    return [str(r["name"]) for r in document.get("resources") or [] if isinstance(r, dict) and "name" in r]


def has_gpu_backend(config: Path) -> bool:
    """Whether the plugin config has an NVML gpu resource (its plugin serves dcgm-exporter's series)."""
    document = yamlload.load(config.read_text()) or {}
    return any(isinstance(r, dict) and r.get("backend") == "gpu" for r in document.get("resources") or [])


def free_loopback_port() -> int:
    """A port free on 127.0.0.1 now (the plugin binds it a moment later; nothing else here takes ports)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def nvml_gpu_count() -> int:
    """GPUs NVML can see (0 without a driver, library or GPU)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # NVMLError or OSError: no driver or library
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:
        return 0
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def checkout() -> Path:
    return Path(__file__).resolve().parents[2]


def example(name: str) -> Path:
    """examples/<name> from the source checkout, else the current directory."""
    for base in (checkout(), Path.cwd()):
        if (base / "examples" / name).exists():
            return base / "examples" / name
    raise StartError(f"examples/{name} not found in {checkout()} or {Path.cwd()}")
