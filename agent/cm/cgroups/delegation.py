"""Where the agent builds its hierarchy under the systemd driver: inside its own delegated subtree.

The kubelet asks systemd over D-Bus to create `kubepods.slice`. kubenode runs as a unit with
`Delegate=yes` instead, which hands the unit's cgroup subtree to the service, and makes its
slices there with plain mkdir, as a delegated service may (systemd's CGROUP_DELEGATION rules:
write only inside your own subtree). So under the systemd driver the default cgroup root is
the agent's own cgroup, read from /proc/self/cgroup. Outside systemd that is "/" and nothing
changes.

On cgroup v2 a cgroup with children may hold no processes once controllers are enabled for
them (the no-internal-processes rule), so the agent first moves itself into a leaf,
`<own>/supervisor`, as systemd's DelegateSubgroup= would do, whenever its own cgroup is the
cgroup root or an ancestor of it: under the systemd driver by default, and under cgroupfs when
`--cgroup-root` names the delegated subtree (a case a real v2 kernel refused with EBUSY).
"""

from __future__ import annotations

import os
from pathlib import Path

from agent.cm.cgroups.api import CgroupError

SUPERVISOR_LEAF = "supervisor"
_V1_CONTROLLER_FOR_PATH = "cpu"


def own_cgroup(version: int, proc_self_cgroup: str) -> str:
    """This process's cgroup path: the `0::` line on v2; on v1 the cpu hierarchy's (else systemd's) line."""
    fallback = "/"
    for line in proc_self_cgroup.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if version == 2:
            if hierarchy == "0" and controllers == "":
                return path or "/"
            continue
        names = controllers.split(",")
        if _V1_CONTROLLER_FOR_PATH in names:
            return path or "/"
        if "name=systemd" in names:
            fallback = path or "/"
    return fallback


def default_cgroup_root(driver: str, version: int, proc_self_cgroup: str | None = None) -> str:
    """The cgroup root to use when none was configured."""
    if driver != "systemd":
        return "/"
    text = proc_self_cgroup if proc_self_cgroup is not None else Path("/proc/self/cgroup").read_text()
    own = own_cgroup(version, text)
    if version == 2 and own.rstrip("/").endswith("/" + SUPERVISOR_LEAF):
        own = own.rstrip("/")[: -len(SUPERVISOR_LEAF) - 1] or "/"  # restarted after moving itself
    return own


def leave_for_leaf(mount_root: Path, own: str, pid: int | None = None) -> None:
    """cgroup v2 only: move this process from `own` into `own/supervisor` so `own` may have pod children."""
    if own == "/":
        return
    leaf = mount_root / own.strip("/") / SUPERVISOR_LEAF
    try:
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(pid if pid is not None else os.getpid()))
    except OSError as exc:
        raise CgroupError(
            f"{own}/{SUPERVISOR_LEAF}", "cgroup.procs", f"cannot move the agent there: {exc}"
        ) from exc


def leave_if_inside(
    mount_root: Path, version: int, cgroup_root: str, proc_self_cgroup: str | None = None
) -> bool:
    """cgroup v2: move this process into `<own>/supervisor` if its cgroup is `cgroup_root` or an
    ancestor of it (the mount root is exempt from the rule); True if it moved."""
    if version != 2:
        return False
    text = proc_self_cgroup if proc_self_cgroup is not None else Path("/proc/self/cgroup").read_text()
    own = "/" + own_cgroup(2, text).strip("/")
    root = "/" + cgroup_root.strip("/")
    if own == "/" or not (root == own or root.startswith(own + "/")):
        return False
    leave_for_leaf(mount_root, own)
    return True
