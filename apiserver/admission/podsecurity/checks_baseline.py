"""The baseline Pod Security Standard's checks, as kube's pod-security-admission/policy states them.

Each function takes the pod's metadata and spec (JSON mappings) and returns (reason, detail) when the pod
violates the check, else None; the reasons and details are kube's, word for word.
"""

from __future__ import annotations

from .common import (
    CheckFn,
    Obj,
    Result,
    containers,
    containers_phrase,
    join_quote,
    pluralize,
    security_context,
)

CAPABILITIES_ALLOWED = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})
SYSCTLS_1_0 = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    }
)
SYSCTLS_1_27 = SYSCTLS_1_0 | {"net.ipv4.ip_local_reserved_ports"}
SYSCTLS_1_29 = SYSCTLS_1_27 | {
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}  # fmt: skip
SYSCTLS_1_32 = SYSCTLS_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}
APPARMOR_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"


def privileged(meta: Obj, spec: Obj) -> Result:
    bad = [c.get("name", "") for c in containers(spec) if security_context(c).get("privileged") is True]
    return (
        ("privileged", f"{containers_phrase(bad)} must not set securityContext.privileged=true")
        if bad
        else None
    )


def host_namespaces(meta: Obj, spec: Obj) -> Result:
    used = [f"{name}=true" for name in ("hostNetwork", "hostPID", "hostIPC") if spec.get(name) is True]
    return ("host namespaces", ", ".join(used)) if used else None


def host_path_volumes(meta: Obj, spec: Obj) -> Result:
    bad = [v.get("name", "") for v in spec.get("volumes") or [] if v.get("hostPath") is not None]
    if not bad:
        return None
    return "hostPath volumes", f"{pluralize('volume', 'volumes', len(bad))} {join_quote(bad)}"


def host_ports(meta: Obj, spec: Obj) -> Result:
    bad, ports = [], set()
    for container in containers(spec):
        used = [str(p.get("hostPort")) for p in container.get("ports") or [] if p.get("hostPort")]
        if used:
            bad.append(container.get("name", ""))
            ports.update(used)
    if not bad:
        return None
    return "hostPort", (
        f"{containers_phrase(bad)} {pluralize('uses', 'use', len(bad))} "
        f"{pluralize('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}"
    )


def capabilities_baseline(meta: Obj, spec: Obj) -> Result:
    bad, added = [], set()
    for container in containers(spec):
        extra = [
            str(c) for c in (security_context(container).get("capabilities") or {}).get("add") or []
            if c not in CAPABILITIES_ALLOWED
        ]  # fmt: skip
        if extra:
            bad.append(container.get("name", ""))
            added.update(extra)
    if not bad:
        return None
    return "non-default capabilities", (
        f"{containers_phrase(bad)} must not include {join_quote(sorted(added))} in "
        "securityContext.capabilities.add"
    )


def _app_armor_type_ok(profile: Obj) -> bool:
    return profile.get("type") in ("RuntimeDefault", "Localhost")


def _app_armor_annotation_ok(value: str) -> bool:
    return not value or value == "runtime/default" or value.startswith("localhost/")


def app_armor_profile(meta: Obj, spec: Obj) -> Result:
    """securityContext.appArmorProfile (pod, containers) and the deprecated per-container annotations."""
    setters, values = [], set()
    pod_profile = security_context(spec).get("appArmorProfile")
    if pod_profile is not None and not _app_armor_type_ok(pod_profile):
        setters.append("pod")
        values.add(str(pod_profile.get("type") or ""))
    bad = []
    for container in containers(spec):
        profile = security_context(container).get("appArmorProfile")
        if profile is not None and not _app_armor_type_ok(profile):
            bad.append(container.get("name", ""))
            values.add(str(profile.get("type") or ""))
    if bad:
        setters.append(containers_phrase(bad))
    annotations = sorted(
        f'{key}="{value}"'
        for key, value in (meta.get("annotations") or {}).items()
        if key.startswith(APPARMOR_PREFIX) and not _app_armor_annotation_ok(str(value))
    )
    listed = [*sorted(values), *annotations]
    if annotations:
        setters.append(pluralize("annotation", "annotations", len(annotations)))
    if not setters:
        return None
    reason = pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", len(listed))
    return reason, f"{' and '.join(setters)} must not set AppArmor profile type to {join_quote(listed)}"


def _se_linux(allowed_types: frozenset[str], user_role_without_type: bool) -> CheckFn:
    def check(meta: Obj, spec: Obj) -> Result:
        bad_types: set[str] = set()
        flags = {"user": False, "role": False}

        def valid(options: Obj) -> bool:
            ok = True
            if str(options.get("type") or "") not in allowed_types:
                bad_types.add(str(options.get("type")))
                ok = False
            for key in ("user", "role"):
                if options.get(key):
                    flags[key], ok = True, False
            return ok

        setters = []
        pod_options = security_context(spec).get("seLinuxOptions")
        if pod_options is not None and not valid(pod_options):
            setters.append("pod")
        bad = [
            c.get("name", "")
            for c in containers(spec)
            if security_context(c).get("seLinuxOptions") is not None
            and not valid(security_context(c)["seLinuxOptions"])
        ]
        if bad:
            setters.append(containers_phrase(bad))
        if not setters:
            return None
        data = []
        if bad_types:
            data.append(f"{pluralize('type', 'types', len(bad_types))} {join_quote(sorted(bad_types))}")
        if bad_types or user_role_without_type:  # before 1.31 user and role were said only next to a type
            data += [f"{key} may not be set" for key in ("user", "role") if flags[key]]
        detail = f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: {'; '.join(data)}"
        return "seLinuxOptions", detail

    return check


se_linux_options_1_0 = _se_linux(SELINUX_TYPES, user_role_without_type=False)
se_linux_options_1_31 = _se_linux(SELINUX_TYPES | {"container_engine_t"}, user_role_without_type=True)


def proc_mount(meta: Obj, spec: Obj) -> Result:
    bad, kinds = [], set()
    for container in containers(spec):
        mount = security_context(container).get("procMount")
        if mount is not None and mount != "Default":
            bad.append(container.get("name", ""))
            kinds.add(str(mount))
    if not bad:
        return None
    return (
        "procMount",
        f"{containers_phrase(bad)} must not set securityContext.procMount to {join_quote(sorted(kinds))}",
    )


def proc_mount_1_35_baseline(meta: Obj, spec: Obj) -> Result:
    return None if spec.get("hostUsers") is False else proc_mount(meta, spec)


def _seccomp_annotation_ok(value: str) -> bool:
    return value in ("runtime/default", "docker/default") or value.startswith("localhost/")


def seccomp_baseline_annotations(meta: Obj, spec: Obj) -> Result:
    annotations = meta.get("annotations") or {}
    forbidden = set()
    if SECCOMP_POD_ANNOTATION in annotations and not _seccomp_annotation_ok(
        annotations[SECCOMP_POD_ANNOTATION]
    ):
        forbidden.add(f'{SECCOMP_POD_ANNOTATION}="{annotations[SECCOMP_POD_ANNOTATION]}"')
    for container in containers(spec):
        key = SECCOMP_CONTAINER_PREFIX + str(container.get("name", ""))
        if key in annotations and not _seccomp_annotation_ok(annotations[key]):
            forbidden.add(f'{key}="{annotations[key]}"')
    if not forbidden:
        return None
    noun = pluralize("annotation", "annotations", len(forbidden))
    return "seccompProfile", f"forbidden {noun} {', '.join(sorted(forbidden))}"


def seccomp_ok(profile: Obj) -> bool:
    return profile.get("type") in ("RuntimeDefault", "Localhost")


def seccomp_baseline(meta: Obj, spec: Obj) -> Result:
    setters, values = [], set()
    pod_profile = security_context(spec).get("seccompProfile")
    if pod_profile is not None and not seccomp_ok(pod_profile):
        setters.append("pod")
        values.add(str(pod_profile.get("type") or ""))
    bad = []
    for container in containers(spec):
        profile = security_context(container).get("seccompProfile")
        if profile is not None and not seccomp_ok(profile):
            bad.append(container.get("name", ""))
            values.add(str(profile.get("type") or ""))
    if bad:
        setters.append(containers_phrase(bad))
    if not setters:
        return None
    return "seccompProfile", (
        f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to "
        f"{join_quote(sorted(values))}"
    )


def _sysctls(allowed: frozenset[str]) -> CheckFn:
    def check(meta: Obj, spec: Obj) -> Result:
        bad = [
            str(s.get("name"))
            for s in security_context(spec).get("sysctls") or []
            if s.get("name") not in allowed
        ]
        return ("forbidden sysctls", ", ".join(bad)) if bad else None

    return check


sysctls_1_0 = _sysctls(SYSCTLS_1_0)
sysctls_1_27 = _sysctls(SYSCTLS_1_27)
sysctls_1_29 = _sysctls(SYSCTLS_1_29)
sysctls_1_32 = _sysctls(SYSCTLS_1_32)


def windows_host_process(meta: Obj, spec: Obj) -> Result:
    def host_process(obj: Obj) -> bool:
        return (security_context(obj).get("windowsOptions") or {}).get("hostProcess") is True

    setters = ["pod"] if host_process(spec) else []
    bad = [c.get("name", "") for c in containers(spec) if host_process(c)]
    if bad:
        setters.append(containers_phrase(bad))
    if not setters:
        return None
    return (
        "hostProcess",
        f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true",
    )


def _hosts(handler: Obj | None) -> list[str]:
    if not handler:
        return []
    return [
        str(h)
        for h in ((handler.get("httpGet") or {}).get("host"), (handler.get("tcpSocket") or {}).get("host"))
        if h
    ]


def host_probes_and_lifecycle(meta: Obj, spec: Obj) -> Result:
    bad, hosts = set(), set()
    for container in containers(spec):
        lifecycle = container.get("lifecycle") or {}
        handlers = [container.get(p) for p in ("livenessProbe", "readinessProbe", "startupProbe")]
        found = [
            h
            for handler in [*handlers, lifecycle.get("postStart"), lifecycle.get("preStop")]
            for h in _hosts(handler)
        ]
        if found:
            bad.add(str(container.get("name", "")))
            hosts.update(found)
    if not bad:
        return None
    return "probe or lifecycle host", (
        f"{containers_phrase(sorted(bad))} {pluralize('uses', 'use', len(bad))} "
        f"{pluralize('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} "
        f"{join_quote(sorted(hosts))}"
    )
