"""CPUs as devices: one per logical CPU ("cpu<N>") or per physical core with its siblings ("core<N>").

Allocate answers the cpuset (KUBENODE_CPUSET env and the kubenode.io/cpuset
annotation) so the node agent can pin the pod's cgroup. Preferred allocation
packs into one NUMA node and keeps SMT siblings together.

Under a real kubelet nothing reads that env to pin, so with CDI on (`cdi: true`, or by default when the
CDI spec dir exists) Allocate first writes a CDI entry for the set and also answers its name in
`cdi_devices`; the runtime's createRuntime hook then writes the cpuset (deviceplugin.cdi, .cdihook). A
thread prunes entries of freed sets from the kubelet's PodResources List. Without CDI a container gets
only the env, and the first Allocate logs that pinning under a kubelet needs CDI.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence

from deviceplugin import cdi
from deviceplugin.backend import Backend, BackendError, ContainerAllocation, Device, OnChange
from deviceplugin.backends.cputopology import LogicalCpu, read_cpu_topology
from deviceplugin.config import CpuOptions
from deviceplugin.hookcommand import HookCommandError, check_present, hook_command
from deviceplugin.packing import pack
from kubenode.cpuset import format_cpuset
from kubenode.devicecontract import CPUSET_ENV

log = logging.getLogger(__name__)


CPUSET_ANNOTATION = "kubenode.io/cpuset"


class CpuBackend(Backend):
    def __init__(self, options: CpuOptions, resource_name: str = "kubenode.io/cpu") -> None:
        self.options = options
        self.resource_name = resource_name
        self.topology = read_cpu_topology(options.sysfs_root)
        self._cpus_of: dict[str, frozenset[int]] = {}
        self._core_of: dict[str, int] = {}
        self._devices: list[Device] = []
        for cpu in self.topology:
            if options.unit == "thread":
                self._add(f"cpu{cpu.cpu}", frozenset({cpu.cpu}), cpu, options.reserved)
            elif cpu.cpu == cpu.core:
                self._add(f"core{cpu.core}", cpu.siblings, cpu, options.reserved)
        self.cdi_spec = _cdi_spec(options, resource_name)
        self.allocate_blocks = self.cdi_spec is not None  # each Allocate writes and fsyncs the CDI spec
        self._told_no_cdi = False
        self._stop_pruning = threading.Event()
        self._pruner: threading.Thread | None = None
        self._listing_socket: tuple[int, int] | None = None  # the PodResources socket that last listed pods

    def _add(self, device_id: str, cpus: frozenset[int], cpu: LogicalCpu, reserved: frozenset[int]) -> None:
        if cpus & reserved:
            return
        self._cpus_of[device_id] = cpus
        self._core_of[device_id] = cpu.core
        numa = () if cpu.numa_node is None else (cpu.numa_node,)
        self._devices.append(Device(device_id, True, numa))

    def cpus_of(self, device_id: str) -> frozenset[int]:
        return self._cpus_of[device_id]

    def devices(self) -> list[Device]:
        return list(self._devices)

    def allocate(self, ids: Sequence[str]) -> ContainerAllocation:
        cpus = frozenset(cpu for device_id in ids for cpu in self._cpus_of[device_id])
        cpuset = format_cpuset(cpus)
        allocation = ContainerAllocation(envs={CPUSET_ENV: cpuset}, annotations={CPUSET_ANNOTATION: cpuset})
        if self.cdi_spec is not None:
            try:
                allocation.cdi_devices.append(self.cdi_spec.add(cpus))  # on disk before the kubelet hears
            except OSError as exc:  # fail the Allocate: a name without its entry would fail the start later
                raise BackendError(
                    f"{self.resource_name}: cannot write {self.cdi_spec.path}: {exc}"
                ) from None
        elif not self._told_no_cdi:
            self._told_no_cdi = True
            # INFO, not a warning: under kubenode's own agent the env is all it needs to pin.
            log.info(
                "%s: CDI is off (%s): containers get %s=%s, which kubenode's agent pins; under a kubelet, "
                "pinning needs CDI (containerd 2.x, CRI-O, containerd 1.7 with enable_cdi)",
                self.resource_name,
                _why_no_cdi(self.options),
                CPUSET_ENV,
                cpuset,
            )
        return allocation

    def start(self, on_change: OnChange) -> None:
        if self.cdi_spec is not None:
            # Entries of an earlier install may name a hook that is gone: they would fail every container
            # start of their set until a new set is allocated. Rewritten before the kubelet can ask.
            replaced = self.cdi_spec.refresh()
            if replaced:
                log.info(
                    "%s: CDI entries in %s rewritten with this plugin's hook %s (they named: %s)",
                    self.resource_name,
                    self.cdi_spec.path,
                    self.cdi_spec.hook.path,
                    "; ".join(replaced),
                )
            self._pruner = threading.Thread(target=self._prune_loop, name="cdi-prune", daemon=True)
            self._pruner.start()

    def stop(self) -> None:
        self._stop_pruning.set()
        if self._pruner is not None:
            self._pruner.join()

    def prune_cdi(self) -> list[str] | None:
        """Drop CDI entries the kubelet no longer lists; None when PodResources cannot be asked, or its
        answer cannot be trusted to list the pods (see below)."""
        if self.cdi_spec is None:
            return []
        socket = self.options.pod_resources_socket
        identity = cdi.socket_identity(socket)
        answer = cdi.allocated_cpusets(socket, self.resource_name, self._cpus_of)
        if answer is None or cdi.socket_identity(socket) != identity:
            return None  # unreachable, or a kubelet restarted during the call
        in_use, pods = answer
        if pods:
            self._listing_socket = identity
        elif identity != self._listing_socket:
            # No pod listed, by a kubelet that never listed one to us: one that has just (re)started answers
            # List before it knows its pods (kubelet 1.37: for about a second, and for as long as its API
            # server is unreachable), while running containers hold their sets and a restart of one needs
            # its entry. Pruning then removed the entries of running pods (found under the real kubelet).
            return None
        dropped = self.cdi_spec.prune(in_use)
        if dropped:
            log.info("%s: CDI entries of freed CPU sets removed: %s", self.resource_name, ", ".join(dropped))
        return dropped

    def _prune_loop(self) -> None:
        unreachable_told = False
        while not self._stop_pruning.wait(self.options.cdi_prune_seconds):
            try:
                reachable = self.prune_cdi() is not None
            except OSError as exc:  # a full or read-only spec dir must not end the thread
                log.warning("%s: pruning CDI entries failed: %s", self.resource_name, exc)
                continue
            if not reachable and not unreachable_told:
                log.info(
                    "%s: PodResources %s unreachable, or a kubelet that has listed no pod yet: CDI entries "
                    "of freed CPU sets stay until it lists pods",
                    self.resource_name,
                    self.options.pod_resources_socket,
                )
            unreachable_told = not reachable

    def preferred(self, available: Sequence[Device], must_include: Sequence[str], size: int) -> list[str]:
        return pack(available, must_include, size, group_of=self._core_of.__getitem__)


def cdi_enabled(options: CpuOptions) -> bool:
    """`cdi: true/false` as given; unset means on when the CDI spec dir exists."""
    return options.cdi if options.cdi is not None else os.path.isdir(options.cdi_spec_dir)


def _why_no_cdi(options: CpuOptions) -> str:
    return "cdi: false" if options.cdi is False else f"no CDI spec dir {options.cdi_spec_dir}"


def _cdi_spec(options: CpuOptions, resource_name: str) -> cdi.CpusetSpec | None:
    if not cdi_enabled(options):
        return None
    try:
        hook = hook_command(options.cdi_hook_path)
        check_present(hook)  # now, not at the first container start
    except HookCommandError as exc:
        raise BackendError(f"{resource_name}: CDI hook: {exc}") from None
    try:
        # Grace of one pruning period: the kubelet lists an allocation within moments of Allocate's answer.
        file_name = cdi.spec_file_name(resource_name)
        return cdi.CpusetSpec(options.cdi_spec_dir, file_name, hook, grace=options.cdi_prune_seconds)
    except (OSError, cdi.SpecError) as exc:
        raise BackendError(f"{resource_name}: CDI spec: {exc}") from None
