"""A CRI container's LinuxContainerSecurityContext from its pod's and its own securityContext.

The same merge as process pods (agent/kuberuntime/securitycontext.py, kube's
DetermineEffectiveSecurityContext): runAsUser, runAsGroup, runAsNonRoot and seccompProfile from the container,
else the pod; privileged, capabilities, allowPrivilegeEscalation and readOnlyRootFilesystem from the container
only; fsGroup and supplementalGroups from the pod. Then as the kubelet passes them: capabilities as add/drop
lists over the runtime's default set, seccomp as a SecurityProfile (RuntimeDefault, Unconfined, or Localhost
with the profile's path under the node's seccomp root), no_new_privs only for an explicit
allowPrivilegeEscalation: false. runAsNonRoot with runAsUser 0 is refused as the kubelet refuses it; without a
runAsUser the image's user decides: `verify_run_as_non_root` checks it as the kubelet's verifyRunAsNonRoot
does (kuberuntime/security_context_others.go), from the uid or user name ImageStatus reports (an image with
neither runs as root).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.container.downwardapi import ContainerConfigError
from agent.container.security import SecurityPolicy
from agent.kuberuntime.securitycontext import (
    check_privileged,
    pod_text,
    security_contexts,
    supplemental_groups,
)
from kubenode.api.cri.v1 import api_pb2 as cri
from kubenode.model import Container, Pod


def _seccomp(profile: Any, root: Path) -> cri.SecurityProfile:
    kind = (profile or {}).get("type", "Unconfined") if isinstance(profile, dict) else "Unconfined"
    if kind == "RuntimeDefault":
        return cri.SecurityProfile(profile_type=cri.SecurityProfile.RuntimeDefault)
    if kind == "Localhost":
        name = str(profile.get("localhostProfile") or "")
        if not name or name.startswith("/") or ".." in Path(name).parts:
            raise ContainerConfigError(f"seccompProfile.localhostProfile {name!r} must be a relative path")
        return cri.SecurityProfile(profile_type=cri.SecurityProfile.Localhost, localhost_ref=str(root / name))
    return cri.SecurityProfile(profile_type=cri.SecurityProfile.Unconfined)


def container_security(pod: Pod, c: Container, policy: SecurityPolicy) -> cri.LinuxContainerSecurityContext:
    pod_sc, sc = security_contexts(pod, c)

    def merged(key: str) -> Any:
        return sc[key] if sc.get(key) is not None else pod_sc.get(key)

    context = cri.LinuxContainerSecurityContext()
    uid, gid = merged("runAsUser"), merged("runAsGroup")
    if isinstance(uid, int) and not isinstance(uid, bool):
        context.run_as_user.value = uid
    if isinstance(gid, int) and not isinstance(gid, bool):
        context.run_as_group.value = gid
    if merged("runAsNonRoot") is True and uid == 0:
        raise ContainerConfigError(
            f'container\'s runAsUser breaks non-root policy (pod: "{pod_text(pod)}", container: {c.name})'
        )
    context.privileged = check_privileged(pod, sc, policy)
    raw_caps = sc.get("capabilities")
    caps: dict[str, Any] = raw_caps if isinstance(raw_caps, dict) else {}
    context.capabilities.add_capabilities.extend(str(x) for x in caps.get("add") or [])
    context.capabilities.drop_capabilities.extend(str(x) for x in caps.get("drop") or [])
    context.supplemental_groups.extend(supplemental_groups(pod_sc))
    context.readonly_rootfs = sc.get("readOnlyRootFilesystem") is True
    context.no_new_privs = sc.get("allowPrivilegeEscalation") is False and not context.privileged
    if not context.privileged:
        context.seccomp.CopyFrom(_seccomp(merged("seccompProfile"), policy.seccomp_root))
    return context


def verify_run_as_non_root(pod: Pod, c: Container, image_user: Callable[[], tuple[int | None, str]]) -> None:
    """With runAsNonRoot and no runAsUser, the image's user must be a non-zero uid: ContainerConfigError with
    kube's message otherwise. `image_user` (asked only then) gives the image's (uid, user name)."""
    pod_sc, sc = security_contexts(pod, c)
    non_root = sc["runAsNonRoot"] if sc.get("runAsNonRoot") is not None else pod_sc.get("runAsNonRoot")
    run_as = sc["runAsUser"] if sc.get("runAsUser") is not None else pod_sc.get("runAsUser")
    if non_root is not True or run_as is not None:
        return  # not asked for, or runAsUser decides (container_security checks it)
    uid, username = image_user()
    where = f'(pod: "{pod_text(pod)}", container: {c.name})'  # Go's %q
    if uid is None and username:
        raise ContainerConfigError(
            f"container has runAsNonRoot and image has non-numeric user ({username}), "
            f"cannot verify user is non-root {where}"
        )
    if not uid:  # 0, or no user at all: the image runs as root
        raise ContainerConfigError(f"container has runAsNonRoot and image will run as root {where}")
