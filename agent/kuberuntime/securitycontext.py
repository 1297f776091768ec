"""What a process container may do: its securityContext, merged and checked, applied between fork and exec.

`process_security(pod, container, policy)` merges the pod's and the container's securityContext as kube's
DetermineEffectiveSecurityContext does (runAsUser, runAsGroup, runAsNonRoot and seccompProfile: the
container's value wins; capabilities, privileged, allowPrivilegeEscalation and readOnlyRootFilesystem: the
container's only; supplementalGroups and fsGroup: the pod's) and returns a `ProcessSecurity`, or raises
`ContainerConfigError` with the kubelet's message (the container then waits with
CreateContainerConfigError):
- runAsNonRoot with an effective uid 0. A process pod has no image user, so without runAsUser it is root;
- privileged where the agent does not allow it (the kubelet's --allow-privileged);
- an unknown capability, or a seccomp profile that cannot be loaded.

`ProcessSecurity.apply_in_child` runs in the child after it joined the pod cgroup, still as root, in the
order runc uses: bounding/inheritable/ambient capabilities cut to the container's set; the seccomp filter
loaded while the process may still load one without no_new_privs; supplementary groups, gid, uid;
no_new_privs; and, when no_new_privs is asked for, the filter only after the change of user. Nothing of
the pod ever runs with more. A process pod shares the host's namespaces, so namespaced sysctls are refused
at admission (`forbidden_sysctl`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from agent.container.downwardapi import ContainerConfigError
from agent.container.security import SecurityPolicy
from agent.kuberuntime.capabilities import container_capabilities, restrict_to
from agent.kuberuntime.rootfs import private_mount_namespace, read_only_root
from agent.kuberuntime.seccomp import build_filter, load_in_child, resolve_profile
from agent.util.libc import LIBC, check
from kubenode.model import Container, Pod

_PR_SET_NO_NEW_PRIVS = 38


@dataclass(frozen=True)
class ProcessSecurity:
    uid: int = 0
    gid: int = 0
    groups: tuple[int, ...] = ()
    capabilities: frozenset[str] = frozenset()
    privileged: bool = False
    no_new_privs: bool = False
    read_only_root: bool = False
    # A compiled libseccomp filter (pyseccomp.SyscallFilter), or None for unconfined.
    seccomp_filter: Any = field(default=None, compare=False, repr=False)

    def apply_in_child(self) -> None:
        if self.read_only_root:
            private_mount_namespace()
            read_only_root()
        if not self.privileged:
            restrict_to(self.capabilities)
        if self.seccomp_filter is not None and not self.no_new_privs:
            load_in_child(self.seccomp_filter)  # still root: allowed without no_new_privs
        os.setgroups(list(self.groups))
        os.setresgid(self.gid, self.gid, self.gid)
        os.setresuid(self.uid, self.uid, self.uid)
        if self.no_new_privs:
            check(LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
            if self.seccomp_filter is not None:
                load_in_child(self.seccomp_filter)


def _context(obj: Any) -> dict[str, Any]:
    value = obj.get("securityContext") if isinstance(obj, dict) else None
    return value if isinstance(value, dict) else {}


def raw_container(pod: Pod, name: str) -> dict[str, Any]:
    """The container's object as the pod was written (the model keeps only what scheduling needs)."""
    spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
    for key in ("initContainers", "containers"):
        for item in (spec or {}).get(key) or []:
            if isinstance(item, dict) and item.get("name") == name:
                return item
    return {}


def pod_text(pod: Pod) -> str:
    """The kubelet's format.Pod: name_namespace(uid)."""
    return f"{pod.name}_{pod.namespace}({pod.uid})"


def _int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ContainerConfigError(f"{where} must be a non-negative integer, got {value!r}")
    return value


def security_contexts(pod: Pod, container: Container) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod's and the container's securityContext as written ({} where absent)."""
    spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
    return _context(spec), _context(raw_container(pod, container.name))


def supplemental_groups(pod_sc: dict[str, Any]) -> list[int]:
    """fsGroup, then supplementalGroups, each once (the pod's only)."""
    groups: list[int] = []
    fs_group = _int(pod_sc.get("fsGroup"), "securityContext.fsGroup")
    if fs_group is not None:
        groups.append(fs_group)
    for index, group in enumerate(pod_sc.get("supplementalGroups") or []):
        value = _int(group, f"securityContext.supplementalGroups[{index}]")
        if value is not None and value not in groups:
            groups.append(value)
    return groups


def check_privileged(pod: Pod, sc: dict[str, Any], policy: SecurityPolicy) -> bool:
    privileged = sc.get("privileged") is True
    if privileged and not policy.allow_privileged:
        raise ContainerConfigError(
            f"pod with UID {pod.uid!r} specified privileged container, but is disallowed"
        )
    return privileged


def process_security(pod: Pod, container: Container, policy: SecurityPolicy) -> ProcessSecurity:
    pod_sc, sc = security_contexts(pod, container)

    def merged(key: str) -> Any:
        return sc[key] if sc.get(key) is not None else pod_sc.get(key)

    uid = _int(merged("runAsUser"), "securityContext.runAsUser")
    gid = _int(merged("runAsGroup"), "securityContext.runAsGroup")
    if merged("runAsNonRoot") is True:
        if uid == 0:
            raise ContainerConfigError(
                f"container's runAsUser breaks non-root policy (pod: {pod_text(pod)!r}, "
                f"container: {container.name})"
            )
        if uid is None:
            # No image user to fall back on: the process would run as root.
            raise ContainerConfigError(
                f"container has runAsNonRoot and image will run as root (pod: {pod_text(pod)!r}, "
                f"container: {container.name})"
            )
    privileged = check_privileged(pod, sc, policy)
    raw_caps = sc.get("capabilities")
    raw_caps = raw_caps if isinstance(raw_caps, dict) else {}
    capabilities = container_capabilities(privileged, raw_caps.get("add") or [], raw_caps.get("drop") or [])
    groups = supplemental_groups(pod_sc)
    # kube's AddNoNewPrivileges: only an explicit allowPrivilegeEscalation: false, never for privileged.
    no_new_privs = sc.get("allowPrivilegeEscalation") is False and not privileged
    seccomp_filter = None
    if not privileged:  # a privileged container runs unconfined, as with every runtime
        profile = resolve_profile(merged("seccompProfile"), capabilities, policy.seccomp_root)
        if profile is not None:
            seccomp_filter = build_filter(profile, no_new_privs)
    return ProcessSecurity(
        uid=uid or 0,
        gid=gid or 0,
        groups=tuple(groups),
        capabilities=capabilities,
        privileged=privileged,
        no_new_privs=no_new_privs,
        read_only_root=sc.get("readOnlyRootFilesystem") is True,
        seccomp_filter=seccomp_filter,
    )
