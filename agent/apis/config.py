"""The agent's settings: defaults that work on one machine with no setup, a YAML file, and flags on top.

Config file keys (all optional) are the camelCase forms of the fields below, e.g.
`nodeName`, `manifests`, `stateDir`, `cgroupRoot`, `cgroupDriver`, `devicePluginDir`, `pluginsRegistryDir`,
`listen`, `secureListen`, `nodeIp`, `podPidsLimit`, `maxPods`, `allowPrivileged`, `devicePluginWait`,
`resyncInterval`,
`manifestRescanInterval`, and the kubelet's `topologyManagerPolicy`, `topologyManagerScope`,
`topologyManagerPolicyOptions` (with `sysfsRoot`, where the NUMA nodes and their distances are read; a
fake tree works too), `cdiSpecDirs` and `criAppliesCdi` (CDI, agent/cm/cdidevices.py), `nodeFeaturesDir`
(the node labeller, agent/nodestatus/nodefeatures.py).
Unknown keys are an error naming the file and the key.
"""

from __future__ import annotations

import dataclasses
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent.eviction.thresholds import DEFAULT_HARD
from kubenode.model import ValidationError
from kubenode.model.quantity import to_amount
from kubenode.model.resources import is_dns1123_subdomain
from kubenode.ports import AGENT_STATUS_PORT

DEFAULT_MANIFESTS = Path("/etc/kubenode/manifests")
DEFAULT_STATE_DIR = Path("/var/lib/kubenode")
# Not the kubelet's /var/lib/kubelet/device-plugins, so the agent never fights a real kubelet.
DEFAULT_DEVICE_PLUGIN_DIR = Path("/var/lib/kubenode/device-plugins")
# Where DRA drivers put their registration sockets (the kubelet's /var/lib/kubelet/plugins_registry).
DEFAULT_PLUGINS_REGISTRY_DIR = Path("/var/lib/kubenode/plugins_registry")
# Not 10256 (kube-proxy's health port): see kubenode/ports.py.
DEFAULT_LISTEN = f"127.0.0.1:{AGENT_STATUS_PORT}"


def default_node_name() -> str:
    name = socket.gethostname().split(".")[0].lower()
    name = re.sub(r"[^a-z0-9-]", "-", name).strip("-")
    return name if is_dns1123_subdomain(name) else "localhost"


@dataclass
class AgentConfig:
    node_name: str = field(default_factory=default_node_name)
    manifests: Path = DEFAULT_MANIFESTS
    state_dir: Path = DEFAULT_STATE_DIR
    # "" = automatic: "/" with the cgroupfs driver, the agent's own delegated cgroup with systemd.
    cgroup_root: str = ""
    cgroup_driver: str = "cgroupfs"
    device_plugin_dir: Path | None = DEFAULT_DEVICE_PLUGIN_DIR  # None: no device manager
    plugins_registry_dir: Path | None = DEFAULT_PLUGINS_REGISTRY_DIR  # None: no DRA drivers
    listen: str = DEFAULT_LISTEN  # "" disables the status endpoint
    # The authenticated HTTPS daemon endpoint (the kubelet's --port) served when joining a cluster: logs,
    # exec, attach, port-forward for the API server. "" = the host of `listen` (or 127.0.0.1), any port.
    secure_listen: str = ""
    # The node's InternalIP (the kubelet's --node-ip; key nodeIp); "" = the default route's source address.
    node_ip: str = ""
    pod_pids_limit: int = -1
    max_pods: int = 110
    # Seconds after start during which a pod needing an extended resource no plugin has registered yet
    # waits for one instead of being rejected (plugins often start after the agent).
    device_plugin_wait: float = 30.0
    resync_interval: float = 60.0
    manifest_rescan_interval: float = 20.0
    housekeeping_interval: float = 2.0
    relist_interval: float = 0.5
    # Joining a cluster (agent/nodestatus/cluster.py): a kubeconfig file, or the pod's service account
    # with in_cluster.
    kubeconfig: Path | None = None
    in_cluster: bool = False
    node_labels: dict[str, str] = field(default_factory=dict)
    register_with_taints: list[str] = field(default_factory=list)  # key[=value]:Effect
    system_reserved: dict[str, str] = field(default_factory=dict)  # resource -> quantity
    kube_reserved: dict[str, str] = field(default_factory=dict)
    node_status_update_frequency: float = 10.0  # the kubelet's defaults
    node_status_report_frequency: float = 300.0
    node_lease_duration_seconds: int = 40
    node_lease_renew_interval: float = 10.0
    pod_status_resync_interval: float = 10.0  # the status manager's full reconcile
    api_backoff_max: float = 10.0  # longest wait between tries to reach the API server
    crash_loop_backoff_initial: float = 10.0  # the kubelet's first crash-loop back-off (tests shorten it)
    # The kubelet's container log rotation: the live log's size, the files kept per container (the live one
    # included) and how often they are checked.
    container_log_max_size: str = "10Mi"
    container_log_max_files: int = 5
    container_log_monitor_interval: float = 10.0
    # The eviction manager (agent/eviction): the kubelet's flags and defaults. Thresholds as the flags write
    # them (memory.available<100Mi,...) or as the config file's mapping (memory.available: 100Mi).
    eviction_hard: Any = DEFAULT_HARD
    eviction_soft: Any = ""
    eviction_soft_grace_period: Any = ""
    eviction_minimum_reclaim: Any = ""
    eviction_pressure_transition_period: float = 300.0
    eviction_max_pod_grace_period: int = 0
    eviction_monitoring_period: float = 10.0
    # Whether a container may run privileged (the kubelet's --allow-privileged, whose default was true).
    allow_privileged: bool = True
    # The kubelet's Topology Manager (agent/cm/topologymanager): none keeps allocation unaligned, as before.
    topology_manager_policy: str = "none"
    topology_manager_scope: str = "container"
    topology_manager_policy_options: dict[str, str] = field(default_factory=dict)
    sysfs_root: Path = Path("/sys")
    # How long a ConfigMap or Secret read from the API server is used before it is read again (the TTL of
    # the kubelet's cache-based managers; one minute, their default). Tests shorten it.
    config_map_and_secret_ttl: float = 60.0
    # CRI (issue 27): "" runs every pod as host processes; unix:///path runs pods through that runtime
    # (agent/kuberuntime/selector.py). CRI pods log under pod_logs_dir, the kubelet's podLogsDir.
    container_runtime_endpoint: str = ""
    pod_logs_dir: Path = Path("/var/log/pods")
    # CDI (issue 37): where the specs are read, in priority order, when the agent resolves CDI names itself
    # (process pods; a CRI runtime that does not apply CDI); and whether the CRI runtime applies them:
    # auto (ask it: agent/kuberuntime/cri/cdisupport.py), true, false.
    cdi_spec_dirs: list[str] = field(default_factory=lambda: ["/etc/cdi", "/var/run/cdi"])
    cri_applies_cdi: str = "auto"
    # Node Feature Discovery's local feature files, applied to the Node's labels (issue 38); None: off.
    node_features_dir: Path | None = Path("/etc/kubernetes/node-feature-discovery/features.d")

    @property
    def joins_cluster(self) -> bool:
        return self.kubeconfig is not None or self.in_cluster

    def validate(self, source: str = "") -> None:
        if not is_dns1123_subdomain(self.node_name):
            raise ValidationError(
                source, "nodeName", f"must be a lowercase RFC 1123 subdomain: {self.node_name!r}"
            )
        if self.cgroup_driver not in ("cgroupfs", "systemd"):
            raise ValidationError(
                source, "cgroupDriver", f"must be cgroupfs or systemd, got {self.cgroup_driver!r}"
            )
        if self.cgroup_root and not self.cgroup_root.startswith("/"):
            raise ValidationError(source, "cgroupRoot", f"must be an absolute path, got {self.cgroup_root!r}")
        if self.listen:
            parse_listen(self.listen, source)
        if self.secure_listen:
            parse_listen(self.secure_listen, source, "secureListen")
        if not isinstance(self.allow_privileged, bool):
            raise ValidationError(
                source, "allowPrivileged", f"must be true or false, got {self.allow_privileged!r}"
            )
        try:
            if to_amount("memory", self.container_log_max_size) <= 0:
                raise ValueError
        except (ValueError, TypeError):
            raise ValidationError(
                source,
                "containerLogMaxSize",
                f"must be a positive quantity such as 10Mi, got {self.container_log_max_size!r}",
            ) from None
        if self.container_log_max_files < 2:
            raise ValidationError(
                source, "containerLogMaxFiles", "must be at least 2 (the live log and one rotated)"
            )
        if self.container_log_monitor_interval <= 0:
            raise ValidationError(
                source, "containerLogMonitorInterval", "must be a positive number of seconds"
            )
        from agent.eviction.thresholds import parse_thresholds

        try:
            parse_thresholds(
                self.eviction_hard,
                self.eviction_soft,
                self.eviction_soft_grace_period,
                self.eviction_minimum_reclaim,
            )
        except ValueError as exc:
            field, _, problem = str(exc).partition(": ")
            raise ValidationError(source, field, problem) from None
        if self.container_runtime_endpoint:
            from kubenode.criendpoint import socket_path

            try:
                socket_path(self.container_runtime_endpoint)
            except ValueError as exc:
                raise ValidationError(source, "containerRuntimeEndpoint", str(exc)) from None
        if not isinstance(self.cdi_spec_dirs, list) or not all(
            isinstance(d, str) and d.startswith("/") for d in self.cdi_spec_dirs
        ):
            raise ValidationError(
                source, "cdiSpecDirs", f"must be a list of absolute paths, got {self.cdi_spec_dirs!r}"
            )
        if self.cri_applies_cdi not in ("auto", "true", "false"):
            raise ValidationError(
                source, "criAppliesCdi", f"must be auto, true or false, got {self.cri_applies_cdi!r}"
            )
        if self.max_pods < 1:
            raise ValidationError(source, "maxPods", "must be at least 1")
        if self.kubeconfig is not None and not Path(self.kubeconfig).is_file():
            raise ValidationError(source, "kubeconfig", f"{self.kubeconfig}: no such file")
        from agent.apis.clusterflags import parse_node_labels, parse_reserved, parse_taints

        self.node_labels = parse_node_labels(self.node_labels, source)
        self.register_with_taints = parse_taints(self.register_with_taints, source)
        for key in ("system_reserved", "kube_reserved"):
            raw = getattr(self, key)
            parse_reserved(raw, source, _camel(key))
            setattr(self, key, dict(raw) if isinstance(raw, dict) else _pairs_text(raw))
        self._validate_topology(source)

    def _validate_topology(self, source: str) -> None:
        """The kubelet's NewManager checks, this machine's NUMA nodes included (a policy other than none
        on more nodes than max-allowable-numa-nodes is refused, as the kubelet refuses to start)."""
        from agent.cm.topologymanager import (
            POLICIES,
            SCOPES,
            TopologyManagerError,
            new_manager,
            parse_options_text,
            parse_policy_options,
        )
        from agent.cm.topologymanager.options import PolicyOptionError

        if self.topology_manager_policy not in POLICIES:
            raise ValidationError(
                source,
                "topologyManagerPolicy",
                f'unknown policy: "{self.topology_manager_policy}" (known: {", ".join(POLICIES)})',
            )
        if self.topology_manager_scope not in SCOPES:
            raise ValidationError(
                source,
                "topologyManagerScope",
                f'unknown scope: "{self.topology_manager_scope}" (known: {", ".join(SCOPES)})',
            )
        options = self.topology_manager_policy_options
        try:
            if not isinstance(options, dict):
                options = parse_options_text(str(options or ""))
            self.topology_manager_policy_options = {str(k): str(v) for k, v in options.items()}
            parse_policy_options(self.topology_manager_policy_options)
        except PolicyOptionError as exc:
            raise ValidationError(source, "topologyManagerPolicyOptions", str(exc)) from None
        self.sysfs_root = Path(self.sysfs_root or "/sys")
        try:
            new_manager(
                self.topology_manager_policy,
                self.topology_manager_scope,
                self.topology_manager_policy_options,
                sysfs_root=self.sysfs_root,
            )
        except TopologyManagerError as exc:
            raise ValidationError(source, "topologyManagerPolicy", str(exc)) from None


def describe_config_error(exc: ValidationError) -> str:
    """A settings error as the user wrote it: the flag for the command line, else the file and key."""
    if exc.source == "command line" and exc.field:
        flag = "--" + "".join(f"-{c.lower()}" if c.isupper() else c for c in exc.field)
        return f"{flag}: {exc.message}"
    return str(exc)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def load_config(path: Path | None) -> AgentConfig:
    config = AgentConfig()
    if path is None:
        return config
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValidationError(str(path), "", f"cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise ValidationError(str(path), "", "must be a mapping of settings")
    by_key = {_camel(f.name): f for f in dataclasses.fields(AgentConfig)}
    for key, value in data.items():
        f = by_key.get(str(key))
        if f is None:
            raise ValidationError(str(path), str(key), f"unknown setting; known: {', '.join(sorted(by_key))}")
        setattr(config, f.name, _coerce(f.name, value, str(path), str(key)))
    config.validate(str(path))
    return config


def _coerce(name: str, value: Any, source: str, key: str) -> Any:
    current = getattr(AgentConfig(), name)
    if name == "cri_applies_cdi" and isinstance(value, bool):
        return str(value).lower()  # YAML's true/false
    if name.startswith("eviction_") and isinstance(value, dict):
        return value  # thresholds as a mapping, as the kubelet's config file writes them
    if name in (
        "manifests", "state_dir", "device_plugin_dir", "plugins_registry_dir", "kubeconfig", "sysfs_root",
        "pod_logs_dir", "node_features_dir",
    ):  # fmt: skip
        if value is not None and not isinstance(value, str):
            raise ValidationError(source, key, f"must be a path, got {value!r}")
        return Path(value) if value else None
    if isinstance(current, bool) or not isinstance(current, int | float | str):
        return value
    kind = {int: "an integer", float: "a number", str: "a string"}[type(current)]
    # int() and float() would quietly take a bool (true -> 1) or cut a fraction (1.5 -> 1); str() a list.
    if (
        isinstance(value, bool | list | dict)
        or (isinstance(current, int) and isinstance(value, float) and not value.is_integer())
        or (isinstance(current, int | float) and value is None)
    ):
        raise ValidationError(source, key, f"must be {kind}, got {value!r}")
    try:
        return type(current)(value)
    except (TypeError, ValueError):
        raise ValidationError(source, key, f"must be {kind}, got {value!r}") from None


def _pairs_text(text: Any) -> dict[str, str]:
    """a=b,c=d (already checked) as a mapping."""
    if not text:
        return {}
    return {k.strip(): v.strip() for k, _, v in (item.partition("=") for item in str(text).split(","))}


def parse_listen(listen: str, source: str = "", key: str = "listen") -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValidationError(source, key, f"must be HOST:PORT, got {listen!r}")
    return host or "127.0.0.1", int(port)
