"""The gpu backend's options (`resources[].gpu`) and their parsing; config.py calls `parse_gpu`.

    gpu:
      idStrategy: uuid            # uuid | index
      cdi: true                   # Allocate answers nvidia.com/gpu=<uuid>; the spec goes to cdiSpecDir
      ignoredXids: [13, 31, 43, 45, 68, 109]   # Xids that do not mark a GPU unhealthy
      featuresFile: /etc/kubernetes/node-feature-discovery/features.d/kubenode-gfd   # GFD labels
      sharing:                    # NVIDIA's shape; timeSlicing and mps are exclusive
        mps: {resources: [{name: nvidia.com/gpu, replicas: 4}]}

Sharing names the resource it applies to, as NVIDIA's config does; here that must be this resource's
own name, and it sets the resource's replicas (so `replicas:` beside it is refused).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deviceplugin.config import _Node

DEFAULT_IGNORED_XIDS = frozenset({13, 31, 43, 45, 68, 109})  # application errors, not GPU faults
DEFAULT_CDI_SPEC_DIR = "/var/run/cdi"
DEFAULT_PODRESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
DEFAULT_FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"  # NFD's local source
SHARING_STRATEGIES = ("none", "time-slicing", "mps")  # GFD's gpu.sharing-strategy values


@dataclass(frozen=True)
class GpuOptions:
    id_strategy: str = "uuid"  # "uuid" or "index"
    cdi: bool = False  # also return CDI device names <cdi_kind>=<uuid>
    cdi_kind: str = "nvidia.com/gpu"
    cdi_spec_dir: str = DEFAULT_CDI_SPEC_DIR
    driver_root: str = "/"  # where the driver's files are on this host (a fake root in tests)
    ldconfig: str = "ldconfig"  # `ldconfig -p` lists the loader cache, where the driver's libraries are
    ignored_xids: frozenset[int] = DEFAULT_IGNORED_XIDS
    recovery_seconds: float = 60.0  # a faulted GPU passing probes this long is healthy again
    probe_interval_seconds: float = 5.0
    fail_on_init_error: bool = False
    dev_root: str = "/dev"
    sysfs_root: str = "/sys"
    features_file: str | None = None  # GFD labels in NFD's local-source format; None: not written
    sharing: str = "none"  # one of SHARING_STRATEGIES
    shared_replicas: int = 1  # replicas named by sharing (time-slicing or mps)
    mps_root: str = "/run/kubenode/mps"  # per GPU: pipe, log and shm directories of its MPS daemon
    mps_control: str = "nvidia-cuda-mps-control"
    # Per-pod metrics: who holds which GPU, and (shared GPUs) which pod a process belongs to.
    pod_resources_socket: str = DEFAULT_PODRESOURCES_SOCKET
    pod_logs_dir: str = "/var/log/pods"
    proc_root: str = "/proc"


def parse_gpu(node: _Node, resource_name: str) -> GpuOptions:
    node.only(
        "idStrategy",
        "cdi",
        "cdiKind",
        "cdiSpecDir",
        "driverRoot",
        "ldconfig",
        "ignoredXids",
        "recoverySeconds",
        "probeIntervalSeconds",
        "failOnInitError",
        "devRoot",
        "sysfsRoot",
        "featuresFile",
        "sharing",
        "mpsRoot",
        "mpsControl",
        "podResourcesSocket",
        "podLogsDir",
        "procRoot",
    )
    strategy = node.text("idStrategy", "uuid")
    if strategy not in ("uuid", "index"):
        node.fail("idStrategy", f"unknown strategy {strategy!r} (expected uuid or index)")
    xids = node.items("ignoredXids", default=None)
    ignored = DEFAULT_IGNORED_XIDS if xids is None else frozenset(x.as_int() for x in xids)
    recovery = node.number("recoverySeconds", 60.0)
    interval = node.number("probeIntervalSeconds", 5.0)
    if interval <= 0:
        node.fail("probeIntervalSeconds", "must be positive")
    sharing, replicas = _parse_sharing(node.child("sharing"), resource_name)
    return GpuOptions(
        id_strategy=strategy,
        cdi=node.flag("cdi", False),
        cdi_kind=node.text("cdiKind", "nvidia.com/gpu"),
        cdi_spec_dir=node.text("cdiSpecDir", DEFAULT_CDI_SPEC_DIR),
        driver_root=node.text("driverRoot", "/"),
        ldconfig=node.text("ldconfig", "ldconfig"),
        ignored_xids=ignored,
        recovery_seconds=recovery,
        probe_interval_seconds=interval,
        fail_on_init_error=node.flag("failOnInitError", False),
        dev_root=node.text("devRoot", "/dev"),
        sysfs_root=node.text("sysfsRoot", "/sys"),
        features_file=node.text("featuresFile", None),
        sharing=sharing,
        shared_replicas=replicas,
        mps_root=node.text("mpsRoot", "/run/kubenode/mps"),
        mps_control=node.text("mpsControl", "nvidia-cuda-mps-control"),
        pod_resources_socket=node.text("podResourcesSocket", DEFAULT_PODRESOURCES_SOCKET),
        pod_logs_dir=node.text("podLogsDir", "/var/log/pods"),
        proc_root=node.text("procRoot", "/proc"),
    )


def _parse_sharing(node: _Node, resource_name: str) -> tuple[str, int]:
    """NVIDIA's `sharing.{timeSlicing,mps}.resources[{name, replicas}]` for this resource."""
    node.only("timeSlicing", "mps")
    if node.has("timeSlicing") and node.has("mps"):
        node.fail("mps", "timeSlicing and mps are exclusive for a resource; choose one")
    for key, strategy in (("timeSlicing", "time-slicing"), ("mps", "mps")):
        if not node.has(key):
            continue
        section = node.child(key)
        section.only("resources")
        entries = section.items("resources", required=True)
        if len(entries) != 1:
            section.fail("resources", f"must name exactly this resource ({resource_name!r}) once")
        entry = entries[0]
        entry.only("name", "replicas")
        name = entry.text("name", required=True)
        if name != resource_name:
            entry.fail("name", f"{name!r} is not this resource ({resource_name!r})")
        replicas = entry.integer("replicas", 0)
        if replicas < 2:
            entry.fail("replicas", "must be at least 2 to share a GPU")
        return strategy, replicas
    return "none", 1
