"""Cgroup names for the QoS tiers and pods, in the kubelet's cgroupfs and systemd forms.

A name is a tuple of components (`("kubepods", "burstable", "pod<uid>")`, the kubelet's
CgroupName). The driver turns it into directory names: cgroupfs uses the components as they
are; systemd makes each level a slice whose name repeats its ancestors, with '-' in a component
escaped to '_' (`kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice`).
Both live under the agent's own cgroup root (on systemd hosts its delegated subtree). A process pod's
container gets a cgroup of its own below its pod's, as runc makes one per container: `<name>` with
cgroupfs, `kubenode-<name>.scope` with systemd (runc's systemd driver makes `<prefix>-<id>.scope`; a
process container's name is its ID here: it is unique in the pod and a DNS label).
"""

from __future__ import annotations

from agent.cm.cgroups.api import CgroupError, Driver
from kubenode.model import QOSClass
from kubenode.model.parse import is_valid_uid

KUBEPODS = "kubepods"
POD_PREFIX = "pod"
SLICE_SUFFIX = ".slice"

CgroupName = tuple[str, ...]

QOS_TIERS: dict[QOSClass, CgroupName] = {
    QOSClass.GUARANTEED: (KUBEPODS,),
    QOSClass.BURSTABLE: (KUBEPODS, "burstable"),
    QOSClass.BEST_EFFORT: (KUBEPODS, "besteffort"),
}


def checked_uid(uid: str) -> str:
    """The UID itself, or CgroupError: a UID becomes a directory name only after this check."""
    if not is_valid_uid(uid):
        raise CgroupError(f"{POD_PREFIX}{uid!r}", "", "invalid pod UID (letters, digits and '-' only)")
    return uid


def pod_cgroup_name(qos: QOSClass, uid: str) -> CgroupName:
    return (*QOS_TIERS[qos], POD_PREFIX + checked_uid(uid))


SCOPE_PREFIX = "kubenode-"
SCOPE_SUFFIX = ".scope"


def container_dir(container: str, driver: Driver) -> str:
    """The directory of a container's cgroup inside its pod's; refuses a name that is not a DNS label."""
    if not container or len(container) > 63 or not all(ch.isalnum() or ch == "-" for ch in container):
        raise CgroupError(f"container {container!r}", "", "invalid container name (a DNS label)")
    return f"{SCOPE_PREFIX}{container}{SCOPE_SUFFIX}" if driver == "systemd" else container


def to_dirs(name: CgroupName, driver: Driver) -> tuple[str, ...]:
    """The directory names, one per level, that the driver gives `name`."""
    if driver == "cgroupfs":
        return name
    dirs = []
    for depth in range(1, len(name) + 1):
        escaped = [part.replace("-", "_") for part in name[:depth]]
        dirs.append("-".join(escaped) + SLICE_SUFFIX)
    return tuple(dirs)


def uid_from_dir(dirname: str, driver: Driver) -> str | None:
    """The pod UID that a pod cgroup directory name carries, or None if it is not a valid pod cgroup."""
    if driver == "systemd":
        if not dirname.endswith(SLICE_SUFFIX):
            return None
        component = dirname[: -len(SLICE_SUFFIX)].rsplit("-", 1)[-1].replace("_", "-")
    else:
        component = dirname
    if not component.startswith(POD_PREFIX):
        return None
    uid = component[len(POD_PREFIX) :]
    return uid if is_valid_uid(uid) else None
