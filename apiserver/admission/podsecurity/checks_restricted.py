"""The restricted Pod Security Standard's checks (on top of baseline's), as kube's policy package has them."""

from __future__ import annotations

from .checks_baseline import seccomp_ok
from .common import (
    Obj,
    Result,
    containers,
    containers_phrase,
    is_windows,
    join_quote,
    pluralize,
    security_context,
)

# The volume types a restricted pod may use; anything else (hostPath, nfs, ...) is a restricted type.
RESTRICTED_VOLUMES = (
    "hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi", "glusterfs", "rbd",
    "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile", "vsphereVolume", "quobyte", "azureDisk",
    "photonPersistentDisk", "portworxVolume", "scaleIO", "storageos",
)  # fmt: skip
ALLOWED_VOLUMES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
    "image",
)


def allow_privilege_escalation_1_8(meta: Obj, spec: Obj) -> Result:
    bad = [
        c.get("name", "")
        for c in containers(spec)
        if security_context(c).get("allowPrivilegeEscalation") is not False
    ]
    if not bad:
        return None
    return "allowPrivilegeEscalation != false", (
        f"{containers_phrase(bad)} must set securityContext.allowPrivilegeEscalation=false"
    )


def allow_privilege_escalation_1_25(meta: Obj, spec: Obj) -> Result:
    return None if is_windows(spec) else allow_privilege_escalation_1_8(meta, spec)


def capabilities_restricted_1_22(meta: Obj, spec: Obj) -> Result:
    missing_drop, adding, added = [], [], set()
    for container in containers(spec):
        name = container.get("name", "")
        capabilities = security_context(container).get("capabilities")
        if capabilities is None:
            missing_drop.append(name)
            continue
        if "ALL" not in (capabilities.get("drop") or []):
            missing_drop.append(name)
        extra = [str(c) for c in capabilities.get("add") or [] if c != "NET_BIND_SERVICE"]
        if extra:
            adding.append(name)
            added.update(extra)
    details = []
    if missing_drop:
        details.append(
            f'{containers_phrase(missing_drop)} must set securityContext.capabilities.drop=["ALL"]'
        )
    if adding:
        details.append(
            f"{containers_phrase(adding)} must not include {join_quote(sorted(added))} in "
            "securityContext.capabilities.add"
        )
    return ("unrestricted capabilities", "; ".join(details)) if details else None


def capabilities_restricted_1_25(meta: Obj, spec: Obj) -> Result:
    return None if is_windows(spec) else capabilities_restricted_1_22(meta, spec)


def restricted_volumes(meta: Obj, spec: Obj) -> Result:
    bad, kinds = [], set()
    for volume in spec.get("volumes") or []:
        if any(volume.get(key) is not None for key in ALLOWED_VOLUMES):
            continue
        bad.append(str(volume.get("name", "")))
        kinds.add(next((key for key in RESTRICTED_VOLUMES if volume.get(key) is not None), "unknown"))
    if not bad:
        return None
    return "restricted volume types", (
        f"{pluralize('volume', 'volumes', len(bad))} {join_quote(bad)} {pluralize('uses', 'use', len(bad))} "
        f"{pluralize('restricted volume type', 'restricted volume types', len(kinds))} "
        f"{join_quote(sorted(kinds))}"
    )


def run_as_non_root(meta: Obj, spec: Obj) -> Result:
    setters = []
    pod_value = security_context(spec).get("runAsNonRoot")
    if pod_value is False:
        setters.append("pod")
    explicit, implicit = [], []
    for container in containers(spec):
        value = security_context(container).get("runAsNonRoot")
        if value is False:
            explicit.append(container.get("name", ""))
        elif value is None and pod_value is not True:
            implicit.append(container.get("name", ""))
    if explicit:
        setters.append(containers_phrase(explicit))
    if setters:
        return (
            "runAsNonRoot != true",
            f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false",
        )
    if implicit:
        return (
            "runAsNonRoot != true",
            f"pod or {containers_phrase(implicit)} must set securityContext.runAsNonRoot=true",
        )
    return None


def run_as_non_root_1_35(meta: Obj, spec: Obj) -> Result:
    """From 1.35 a pod in its own user namespace (hostUsers: false) is not root on the host."""
    return None if spec.get("hostUsers") is False else run_as_non_root(meta, spec)


def run_as_user_1_35(meta: Obj, spec: Obj) -> Result:
    return None if spec.get("hostUsers") is False else run_as_user(meta, spec)


def run_as_user(meta: Obj, spec: Obj) -> Result:
    setters = ["pod"] if security_context(spec).get("runAsUser") == 0 else []
    bad = [c.get("name", "") for c in containers(spec) if security_context(c).get("runAsUser") == 0]
    if bad:
        setters.append(containers_phrase(bad))
    return ("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0") if setters else None


def seccomp_restricted_1_19(meta: Obj, spec: Obj) -> Result:
    setters, values = [], set()
    pod_set = False
    pod_profile = security_context(spec).get("seccompProfile")
    if pod_profile is not None:
        if seccomp_ok(pod_profile):
            pod_set = True
        else:
            setters.append("pod")
            values.add(str(pod_profile.get("type") or ""))
    explicit, implicit = [], []
    for container in containers(spec):
        profile = security_context(container).get("seccompProfile")
        if profile is not None:
            if not seccomp_ok(profile):
                explicit.append(container.get("name", ""))
                values.add(str(profile.get("type") or ""))
        elif not pod_set:
            implicit.append(container.get("name", ""))
    if explicit:
        setters.append(containers_phrase(explicit))
    if setters:
        return "seccompProfile", (
            f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
            f"{join_quote(sorted(values))}"
        )
    if implicit:
        return "seccompProfile", (
            f"pod or {containers_phrase(implicit)} must set securityContext.seccompProfile.type to "
            '"RuntimeDefault" or "Localhost"'
        )
    return None


def seccomp_restricted_1_25(meta: Obj, spec: Obj) -> Result:
    return None if is_windows(spec) else seccomp_restricted_1_19(meta, spec)
