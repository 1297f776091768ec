"""The pod cgroup manager: the kubelet's pod container manager and QoS container manager over one backend."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agent.cm.cgroups.api import CgroupError, Driver, PodCgroupInfo, PodCgroups, ResourceConfig
from agent.cm.cgroups.backend import Dirs, Hierarchies, cgroup_path
from agent.cm.cgroups.detect import detect_version
from agent.cm.cgroups.formulas import (
    MIN_SHARES,
    milli_cpu_to_shares,
    resource_config_for_container,
    resource_config_for_pod,
)
from agent.cm.cgroups.naming import (
    QOS_TIERS,
    checked_uid,
    container_dir,
    pod_cgroup_name,
    to_dirs,
    uid_from_dir,
)
from kubenode.model import Container, Pod, QOSClass
from kubenode.model.resources import CPU, MEMORY

if TYPE_CHECKING:
    from agent.cm.devicecgroup.container import ContainerDevices
    from agent.cm.devicecgroup.rules import DeviceRule

KILL_PASSES = 5  # as the kubelet's pod container manager Destroy
KILL_WAIT_S = 1.0  # per pass: how long killed processes get to leave the cgroup
REMOVE_WAIT_S = 2.0  # rmdir of a cgroup whose last tasks are still exiting returns EBUSY for a moment
POLL_S = 0.005
# A tier's files are read back and corrected at least this often even when the wanted shares did not change
# (drift by another writer); between two checks an unchanged tier costs nothing per pod sync.
QOS_RECHECK_S = 10.0


def _root_dirs(cgroup_root: str) -> Dirs:
    parts = tuple(part for part in cgroup_root.split("/") if part)
    for part in parts:
        if part in (".", ".."):
            raise CgroupError(cgroup_root, "", "cgroup root must not contain '.' or '..'")
    return parts


class PodCgroupManager:
    """Implements `PodCgroups` (see agent.cm.cgroups.api) for one cgroup root and driver."""

    def __init__(
        self,
        backend: Hierarchies,
        cgroup_root: str = "/",
        driver: Driver = "cgroupfs",
        *,
        pids_limit: int = -1,
        enforce_cpu_limits: bool = True,
        devices: ContainerDevices | None = None,
    ) -> None:
        if driver not in ("cgroupfs", "systemd"):
            raise CgroupError(cgroup_root, "", f"unknown cgroup driver {driver!r}")
        self.backend = backend
        self.driver: Driver = driver
        self._root = _root_dirs(cgroup_root)
        self._pids_limit = pids_limit
        self._enforce_cpu_limits = enforce_cpu_limits
        # Who enforces a container's device rules (agent/cm/devicecgroup/container.py); None: nobody, and a
        # container with rules is refused rather than run with every device.
        self._devices = devices
        self._tiers = {qos: self._root + to_dirs(name, driver) for qos, name in QOS_TIERS.items()}
        # Pod workers call in parallel. Making directories is serialised so that no cgroup is seen
        # (and used as a parent) between its mkdir and the copy of its parent's cpuset.
        self._create_lock = threading.Lock()
        # What update_qos_cgroups last made each tier hold, and when (time.monotonic()).
        self._qos_applied: dict[QOSClass, tuple[ResourceConfig, float]] = {}
        # Container cgroups ensure_container made and whose OOM kill count no one has asked for since: the
        # runtime asks once, for its baseline, right before the process is forked; the answer is 0 without
        # reading (a new cgroup has held no task). Dropped on that first question, or when the pod goes.
        self._unused_containers: set[Dirs] = set()
        self._unused_lock = threading.Lock()  # pod workers make and destroy in parallel

    def _create(self, dirs: Dirs) -> bool:
        with self._create_lock:
            return self.backend.create(dirs)

    def _ensure_exists(self, dirs: Dirs) -> None:
        """A tier, which normally exists: looked at first (v1's mkdir of an existing cgroup costs more)."""
        if not self.backend.exists(dirs):
            self._create(dirs)

    @property
    def version(self) -> int:
        return self.backend.version

    # -- QoS tiers --

    def start(self, node_allocatable: Mapping[str, int]) -> None:
        self._qos_applied.clear()
        kubepods = self._tiers[QOSClass.GUARANTEED]
        self._create(kubepods)
        cpu = node_allocatable.get(CPU)
        config = ResourceConfig(
            cpu_shares=milli_cpu_to_shares(cpu) if cpu else None,
            memory_limit=node_allocatable.get(MEMORY) or None,
        )
        self._apply(kubepods, config)
        self._create(self._tiers[QOSClass.BURSTABLE])
        self._create(self._tiers[QOSClass.BEST_EFFORT])
        self._apply(self._tiers[QOSClass.BEST_EFFORT], ResourceConfig(cpu_shares=MIN_SHARES))

    def update_qos_cgroups(self, active_pods: Iterable[Pod]) -> None:
        burstable_cpu = sum(
            pod.requests.get(CPU, 0) for pod in active_pods if pod.qos_class == QOSClass.BURSTABLE
        )
        now = time.monotonic()
        for qos, shares in (
            (QOSClass.BURSTABLE, milli_cpu_to_shares(burstable_cpu)),
            (QOSClass.BEST_EFFORT, MIN_SHARES),
        ):
            config = ResourceConfig(cpu_shares=shares)
            applied = self._qos_applied.get(qos)
            if applied is not None and applied[0] == config and now - applied[1] < QOS_RECHECK_S:
                continue  # a pod that changes no tier (not burstable) costs no tier reads or writes
            self._ensure_exists(self._tiers[qos])
            self._apply(self._tiers[qos], config)
            self._qos_applied[qos] = (config, now)

    def _apply(self, dirs: Dirs, config: ResourceConfig) -> None:
        self.backend.validate(dirs, config)
        self.backend.write(dirs, config)

    # -- pods --

    def resource_config(self, pod: Pod, cpuset: str | None) -> ResourceConfig:
        return resource_config_for_pod(
            pod, enforce_cpu_limits=self._enforce_cpu_limits, pids_limit=self._pids_limit, cpuset=cpuset
        )

    def _pod_dirs(self, qos: QOSClass, uid: str) -> Dirs:
        return self._root + to_dirs(pod_cgroup_name(qos, uid), self.driver)

    def name_for(self, pod: Pod) -> str:
        return cgroup_path(self._pod_dirs(pod.qos_class, pod.uid))

    def exists(self, pod: Pod) -> bool:
        return self.backend.exists(self._pod_dirs(pod.qos_class, pod.uid))

    def ensure(self, pod: Pod, cpuset: str | None = None) -> PodCgroupInfo:
        dirs = self._pod_dirs(pod.qos_class, pod.uid)
        config = self.resource_config(pod, cpuset)
        self._ensure_exists(dirs[:-1])
        self.backend.validate(dirs, config)
        # v1 makes the pod's directory hierarchy by hierarchy: if one mkdir (or the write) fails,
        # the others already made must not stay until the pod terminates.
        fresh = not self.backend.exists_anywhere(dirs)
        created = False
        try:
            created = self._create(dirs)
            if not created:
                self.backend.fit_children_cpusets(dirs, config.cpuset_cpus, before=True)
            self.backend.write(dirs, config)
            if not created:
                self.backend.fit_children_cpusets(dirs, config.cpuset_cpus, before=False)
        except Exception as exc:
            if fresh or created:
                self._undo_create(dirs, exc)
            raise
        made = fresh and created  # nothing of it existed, so nothing can be in it yet
        return PodCgroupInfo(uid=pod.uid, qos=pod.qos_class, name=cgroup_path(dirs), created=made)

    def _undo_create(self, dirs: Dirs, cause: Exception) -> None:
        """Remove a pod cgroup this call made, in every hierarchy; the cause stays the error raised."""
        try:
            self.backend.remove(dirs)
        except CgroupError as cleanup:
            cause.add_note(f"and removing the half-made cgroup failed: {cleanup}")

    def procs_files(self, pod: Pod) -> list[str]:
        return self.backend.procs_files(self._pod_dirs(pod.qos_class, pod.uid))

    # -- containers (process pods: one cgroup per container below the pod's, as runc makes) --

    def _container_dirs(self, pod_dirs: Dirs, container: str) -> Dirs:
        return (*pod_dirs, container_dir(container, self.driver))

    def ensure_container(
        self, pod: Pod, container: Container, cpuset: str | None, device_rules: Sequence[DeviceRule]
    ) -> list[str]:
        dirs = self._container_dirs(self._pod_dirs(pod.qos_class, pod.uid), container.name)
        config = resource_config_for_container(
            container,
            enforce_cpu_limits=self._enforce_cpu_limits,
            pids_limit=self._pids_limit,
            cpuset=cpuset if self.version == 1 else None,  # v2: empty, the pod's effective cpuset
        )
        self.backend.validate(dirs, config)
        made = self._create(dirs)
        self.backend.write(dirs, config)
        files = self.backend.procs_files(dirs)
        if device_rules and self._devices is not None:  # None: no writable device controller (devices_for)
            files += self._devices.enforce(dirs, device_rules)
        with self._unused_lock:
            if made:
                self._unused_containers.add(dirs)
            else:
                self._unused_containers.discard(dirs)
        return files

    def container_procs_files(self, pod: Pod, container: str) -> list[str]:
        dirs = self._container_dirs(self._pod_dirs(pod.qos_class, pod.uid), container)
        if not self.backend.exists(dirs):
            return self.procs_files(pod)  # started before container cgroups (an adopted pod)
        files = self.backend.procs_files(dirs)
        return files + (self._devices.procs_files(dirs) if self._devices is not None else [])

    def container_oom_kills(self, uid: str, container: str) -> int:
        checked_uid(uid)
        with self._unused_lock:  # a cgroup ensure_container has just made has had no task to kill yet
            for qos in QOS_TIERS:
                unused = self._container_dirs(self._pod_dirs(qos, uid), container)
                if unused in self._unused_containers:
                    self._unused_containers.discard(unused)
                    return 0
        dirs = self._container_dirs(self._only(uid), container)
        return self.backend.oom_kills(dirs) if self.backend.exists(dirs) else 0

    def describe_container(self, uid: str, container: str) -> dict[str, object]:
        dirs = self._container_dirs(self._only(uid), container)
        if not self.backend.exists(dirs):
            return {"cgroup": cgroup_path(dirs), "exists": False}
        devices = self._devices.describe(dirs) if self._devices is not None else []
        return {"cgroup": cgroup_path(dirs), "limits": self.backend.read_limits(dirs), "devices": devices}

    def _found(self, uid: str) -> list[Dirs]:
        """The pod's cgroup under whichever tiers hold it (normally one)."""
        checked_uid(uid)
        candidates = (self._pod_dirs(qos, uid) for qos in QOS_TIERS)
        return [dirs for dirs in candidates if self.backend.exists_anywhere(dirs)]

    def pids(self, uid: str) -> set[int]:
        pids: set[int] = set()
        for dirs in self._found(uid):
            pids |= self.backend.pids(dirs)
        return pids

    def signal_all(self, uid: str, sig: int) -> int:
        signalled = 0
        for pid in self.pids(uid):
            try:
                os.kill(pid, sig)
                signalled += 1
            except ProcessLookupError:
                pass  # exited meanwhile
        return signalled

    def destroy(self, uid: str) -> None:
        found = self._found(uid)
        pod_dirs = {self._pod_dirs(qos, uid) for qos in QOS_TIERS}
        with self._unused_lock:
            self._unused_containers = {dirs for dirs in self._unused_containers if dirs[:-1] not in pod_dirs}
        if not found:
            return
        for _ in range(KILL_PASSES):
            if not self.signal_all(uid, signal.SIGKILL):
                break
            _wait_until(lambda: not self.pids(uid), KILL_WAIT_S)
        for dirs in found:
            _retry_busy(partial(self.backend.remove, dirs), REMOVE_WAIT_S)

    def list_pods(self) -> dict[str, PodCgroupInfo]:
        pods: dict[str, PodCgroupInfo] = {}
        for qos, tier in self._tiers.items():
            for dirname in sorted(self.backend.children(tier)):
                uid = uid_from_dir(dirname, self.driver)
                if uid is not None and ((*tier, dirname)) == self._pod_dirs(qos, uid):
                    pods[uid] = PodCgroupInfo(uid=uid, qos=qos, name=cgroup_path((*tier, dirname)))
        return pods

    def _only(self, uid: str) -> Dirs:
        """The pod's cgroup to read a figure from: the first tier holding it (later tiers are not probed)."""
        checked_uid(uid)
        for qos in QOS_TIERS:
            dirs = self._pod_dirs(qos, uid)
            if self.backend.exists_anywhere(dirs):
                return dirs
        raise CgroupError(cgroup_path(self._root), "", f"no cgroup for pod {uid}")

    def read_limits(self, uid: str) -> dict[str, str]:
        return self.backend.read_limits(self._only(uid))

    def cpu_usage_ns(self, uid: str) -> int:
        return self.backend.cpu_usage_ns(self._only(uid))

    def memory_working_set(self, uid: str) -> int:
        return self.backend.memory_working_set(self._only(uid))

    def pods_memory_working_set(self) -> int:
        return self.backend.memory_working_set(self._tiers[QOSClass.GUARANTEED])  # kubepods

    def oom_kills(self, uid: str) -> int:
        return self.backend.oom_kills(self._only(uid))

    def stop_and_remove_root(self) -> None:
        self._qos_applied.clear()
        for qos in (QOSClass.BURSTABLE, QOSClass.BEST_EFFORT, QOSClass.GUARANTEED):
            self.backend.remove_if_empty(self._tiers[qos])
        for depth in range(len(self._root), 0, -1):
            self.backend.remove_if_empty(self._root[:depth])


def _wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def _retry_busy(remove: Callable[[], None], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            remove()
            return
        except CgroupError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(POLL_S)


def build_manager(
    cgroup_root: str,
    driver: Driver,
    *,
    mount_root: Path,
    version: Literal[1, 2] | None,
    pids_limit: int,
    enforce_cpu_limits: bool,
) -> PodCgroups:
    chosen = version or detect_version(mount_root)
    backend: Hierarchies
    if chosen == 2:
        from agent.cm.cgroups.v2 import V2Hierarchies

        backend = V2Hierarchies(mount_root)
    else:
        from agent.cm.cgroups.v1 import V1Hierarchies

        backend = V1Hierarchies(mount_root)
    from agent.cm.devicecgroup.container import devices_for

    return PodCgroupManager(
        backend,
        cgroup_root,
        driver,
        pids_limit=pids_limit,
        enforce_cpu_limits=enforce_cpu_limits,
        devices=devices_for(chosen, mount_root),
    )


def make_pod_cgroups(
    cgroup_root: str = "/",
    driver: Driver = "cgroupfs",
    *,
    mount_root: Path = Path("/sys/fs/cgroup"),
    version: Literal[1, 2] | None = None,
    pids_limit: int = -1,
    enforce_cpu_limits: bool = True,
) -> PodCgroups:
    """The pod cgroup manager for this host.

    version None detects as the kubelet does: statfs(mount_root).f_type == CGROUP2_SUPER_MAGIC
    means v2; a hybrid host (tmpfs plus cgroup2 at unified/) is v1. cgroup_root is where
    `kubepods` goes (tests use a unique root such as /kn-test-<random>).
    """
    return build_manager(
        cgroup_root,
        driver,
        mount_root=mount_root,
        version=version,
        pids_limit=pids_limit,
        enforce_cpu_limits=enforce_cpu_limits,
    )
