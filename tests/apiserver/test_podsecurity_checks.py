"""Pod Security checks, translated case by case from kube's policy/check_*_test.go tables, plus the levels,
versions and configuration of apiserver/admission/podsecurity (no server: plain functions)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from apiserver.admission.podsecurity import checks_baseline as b
from apiserver.admission.podsecurity import checks_restricted as r
from apiserver.admission.podsecurity.checks import evaluate, forbidden_detail
from apiserver.admission.podsecurity.common import CheckFn
from apiserver.admission.podsecurity.config import load
from apiserver.admission.podsecurity.levels import (
    BASELINE,
    LATEST,
    PRIVILEGED,
    RESTRICTED,
    LevelVersion,
    Policy,
    policy_to_evaluate,
)

AA = "container.apparmor.security.beta.kubernetes.io/"
SA = "seccomp.security.alpha.kubernetes.io/pod"
SCP = "container.seccomp.security.alpha.kubernetes.io/"


def named(name: str, context: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name} if context is None else {"name": name, "securityContext": context}


def seccomp(name: str, kind: str) -> dict[str, Any]:
    return named(name, {"seccompProfile": {"type": kind}})


SECCOMP_CONTAINERS = {
    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [
        named("a"),
        named("b", {}),
        seccomp("c", "Unconfined"),
        seccomp("d", "Unconfined"),
        seccomp("e", "RuntimeDefault"),
        seccomp("f", "RuntimeDefault"),
    ],
}
SECCOMP_FALLTHROUGH = {
    "containers": [named("a"), named("b", {}), seccomp("d", "RuntimeDefault"), seccomp("e", "RuntimeDefault")]
}
NO_SECCOMP = (
    'pod or container "a" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"'
)
FALLTHROUGH = (
    'pod or containers "a", "b" must set securityContext.seccompProfile.type to "RuntimeDefault" or '
    '"Localhost"'
)
POD_UNCONFINED = 'pod must not set securityContext.seccompProfile.type to "Unconfined"'
CONTAINERS_UNCONFINED = 'containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined"'
CAPS = {
    "containers": [
        named("a", {"capabilities": {"add": ["FOO", "BAR"]}}),
        named("b", {"capabilities": {"add": ["BAR", "BAZ"]}}),
        named("c", {"capabilities": {"add": ["NET_BIND_SERVICE", "CHOWN"], "drop": ["ALL", "FOO"]}}),
    ]
}
CAPS_DETAIL = (
    'containers "a", "b" must set securityContext.capabilities.drop=["ALL"]; containers "a", "b", "c" '
    'must not include "BAR", "BAZ", "CHOWN", "FOO" in securityContext.capabilities.add'
)
PROC_MOUNT_CONTAINERS = [
    named("a"),
    named("b", {}),
    named("c", {"procMount": "Default"}),
    named("d", {"procMount": "Unmasked"}),
    named("e", {"procMount": "other"}),
]
PROC_MOUNT = 'containers "d", "e" must not set securityContext.procMount to "Unmasked", "other"'
SELINUX_OK = [
    named(n, {"seLinuxOptions": {"type": t}})
    for n, t in zip(
        "abcd", ("container_t", "container_init_t", "container_kvm_t", "container_engine_t"), strict=True
    )
]
SELINUX_BAD = [
    named("e", {"seLinuxOptions": {"type": "bar"}}),
    named("f", {"seLinuxOptions": {"user": "bar"}}),
    named("g", {"seLinuxOptions": {"role": "baz"}}),
]
SELINUX_POD_BAD = {"seLinuxOptions": {"type": "foo", "user": "bar", "role": "baz"}}
ALLOWED_VOLUMES = [
    ("emptyDir", {}),
    ("secret", {}),
    ("persistentVolumeClaim", {"claimName": ""}),
    ("downwardAPI", {}),
    ("configMap", {}),
    ("projected", {}),
    ("csi", {"driver": ""}),
    ("ephemeral", {}),
    ("image", {}),
]
RESTRICTED_VOLUMES = [
    ("hostPath", {"path": ""}),
    ("gcePersistentDisk", {"pdName": ""}),
    ("awsElasticBlockStore", {"volumeID": ""}),
    ("gitRepo", {"repository": ""}),
    ("nfs", {"server": "", "path": ""}),
    ("iscsi", {"targetPortal": "", "iqn": "", "lun": 0}),
    ("glusterfs", {"endpoints": "", "path": ""}),
    ("rbd", {"monitors": [], "image": ""}),
    ("flexVolume", {"driver": ""}),
    ("cinder", {"volumeID": ""}),
    ("cephfs", {"monitors": []}),
    ("flocker", {}),
    ("fc", {}),
    ("azureFile", {"secretName": "", "shareName": ""}),
    ("vsphereVolume", {"volumePath": ""}),
    ("quobyte", {"registry": "", "volume": ""}),
    ("azureDisk", {"diskName": "", "diskURI": ""}),
    ("photonPersistentDisk", {"pdID": ""}),
    ("portworxVolume", {"volumeID": ""}),
    ("scaleIO", {"gateway": "", "system": "", "secretRef": {}}),
    ("storageos", {}),
]
VOLUMES = [
    *({"name": f"a{i}", kind: source} for i, (kind, source) in enumerate(ALLOWED_VOLUMES, 1)),
    *({"name": f"b{i}", kind: source} for i, (kind, source) in enumerate(RESTRICTED_VOLUMES, 1)),
    {"name": "c1"},
]
VOLUMES_DETAIL = (
    "volumes " + ", ".join(f'"b{i}"' for i in range(1, 22)) + ', "c1" use restricted volume types '
    '"awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "fc", "flexVolume", "flocker", '
    '"gcePersistentDisk", "gitRepo", "glusterfs", "hostPath", "iscsi", "nfs", "photonPersistentDisk", '
    '"portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "unknown", "vsphereVolume"'
)


def windows(host_process: bool | None) -> dict[str, Any]:
    return {"windowsOptions": {} if host_process is None else {"hostProcess": host_process}}


# (check, annotations, spec, expected (reason, detail) or None for allowed): kube's tables, case by case.
CASES: list[tuple[str, CheckFn, dict[str, str], dict[str, Any], tuple[str, str] | None]] = [
    # check_appArmorProfile_test.go
    (
        "apparmor default + extra",
        b.app_armor_profile,
        {f"{AA}test": "runtime/default", "env": "prod"},
        {},
        None,
    ),
    (
        "apparmor localhost",
        b.app_armor_profile,
        {f"{AA}test": "localhost/sec-profile01", "env": "dev"},
        {},
        None,
    ),
    ("apparmor none", b.app_armor_profile, {"env": "dev"}, {}, None),
    ("apparmor no annotations", b.app_armor_profile, {}, {}, None),
    (
        "apparmor pod runtime default",
        b.app_armor_profile,
        {},
        {"securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}}},
        None,
    ),
    (
        "apparmor container runtime default",
        b.app_armor_profile,
        {},
        {"containers": [named("foo", {"appArmorProfile": {"type": "RuntimeDefault"}})]},
        None,
    ),
    (
        "apparmor unconfined pod",
        b.app_armor_profile,
        {},
        {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}},
        ("forbidden AppArmor profile", 'pod must not set AppArmor profile type to "Unconfined"'),
    ),
    (
        "apparmor unconfined container",
        b.app_armor_profile,
        {},
        {
            "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
            "containers": [named("foo", {"appArmorProfile": {"type": "Unconfined"}})],
        },
        ("forbidden AppArmor profile", 'container "foo" must not set AppArmor profile type to "Unconfined"'),
    ),
    (
        "apparmor unconfined init container",
        b.app_armor_profile,
        {},
        {
            "securityContext": {"appArmorProfile": {"type": "RuntimeDefault"}},
            "containers": [named("foo")],
            "initContainers": [named("bar", {"appArmorProfile": {"type": "Unconfined"}})],
        },
        ("forbidden AppArmor profile", 'container "bar" must not set AppArmor profile type to "Unconfined"'),
    ),
    (
        "apparmor annotations",
        b.app_armor_profile,
        {
            AA: "bogus",
            f"{AA}a": "",
            f"{AA}b": "runtime/default",
            f"{AA}c": "localhost/",
            f"{AA}d": "localhost/foo",
            f"{AA}e": "unconfined",
            f"{AA}f": "unknown",
        },
        {},
        (
            "forbidden AppArmor profiles",
            f'annotations must not set AppArmor profile type to "{AA}="bogus"", "{AA}e="unconfined"", '
            f'"{AA}f="unknown""',
        ),
    ),
    # check_seccompProfile_restricted_test.go (1.25 and 1.19)
    (
        "seccomp 1.25 none",
        r.seccomp_restricted_1_25,
        {},
        {"containers": [named("a")]},
        ("seccompProfile", NO_SECCOMP),
    ),
    (
        "seccomp 1.25 windows",
        r.seccomp_restricted_1_25,
        {},
        {"os": {"name": "windows"}, "containers": [named("a")]},
        None,
    ),
    (
        "seccomp 1.25 linux",
        r.seccomp_restricted_1_25,
        {},
        {"os": {"name": "linux"}, "containers": [named("a")]},
        ("seccompProfile", NO_SECCOMP),
    ),
    (
        "seccomp 1.25 pod",
        r.seccomp_restricted_1_25,
        {},
        {"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [named("a")]},
        ("seccompProfile", POD_UNCONFINED),
    ),
    (
        "seccomp 1.25 containers",
        r.seccomp_restricted_1_25,
        {},
        SECCOMP_CONTAINERS,
        ("seccompProfile", CONTAINERS_UNCONFINED),
    ),
    (
        "seccomp 1.25 fallthrough",
        r.seccomp_restricted_1_25,
        {},
        SECCOMP_FALLTHROUGH,
        ("seccompProfile", FALLTHROUGH),
    ),
    (
        "seccomp 1.19 none",
        r.seccomp_restricted_1_19,
        {},
        {"containers": [named("a")]},
        ("seccompProfile", NO_SECCOMP),
    ),
    (
        "seccomp 1.19 windows still checked",
        r.seccomp_restricted_1_19,
        {},
        {"os": {"name": "windows"}, "containers": [named("a")]},
        ("seccompProfile", NO_SECCOMP),
    ),
    (
        "seccomp 1.19 containers",
        r.seccomp_restricted_1_19,
        {},
        SECCOMP_CONTAINERS,
        ("seccompProfile", CONTAINERS_UNCONFINED),
    ),
    (
        "seccomp 1.19 fallthrough",
        r.seccomp_restricted_1_19,
        {},
        SECCOMP_FALLTHROUGH,
        ("seccompProfile", FALLTHROUGH),
    ),
    # check_seccompProfile_baseline_test.go (1.0 annotations, 1.19 fields)
    (
        "seccomp baseline pod annotation",
        b.seccomp_baseline_annotations,
        {SA: "unconfined"},
        {},
        ("seccompProfile", f'forbidden annotation {SA}="unconfined"'),
    ),
    (
        "seccomp baseline container annotations",
        b.seccomp_baseline_annotations,
        {f"{SCP}a": "unconfined", f"{SCP}b": "unknown"},
        {"containers": [named("a"), named("b"), named("c")]},
        ("seccompProfile", f'forbidden annotations {SCP}a="unconfined", {SCP}b="unknown"'),
    ),
    (
        "seccomp baseline pod and container annotations",
        b.seccomp_baseline_annotations,
        {SA: "unconfined", f"{SCP}a": "unconfined", f"{SCP}b": "unknown"},
        {"containers": [named("a"), named("b"), named("c")]},
        ("seccompProfile", f'forbidden annotations {SCP}a="unconfined", {SCP}b="unknown", {SA}="unconfined"'),
    ),
    (
        "seccomp baseline pod field",
        b.seccomp_baseline,
        {},
        {"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [named("a")]},
        ("seccompProfile", POD_UNCONFINED),
    ),
    (
        "seccomp baseline container fields",
        b.seccomp_baseline,
        {},
        SECCOMP_CONTAINERS,
        ("seccompProfile", CONTAINERS_UNCONFINED),
    ),
    (
        "seccomp baseline pod and containers",
        b.seccomp_baseline,
        {},
        {**SECCOMP_CONTAINERS, "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
        (
            "seccompProfile",
            'pod and containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined"',
        ),
    ),
    ("seccomp baseline unset is fine", b.seccomp_baseline, {}, {"containers": [named("a")]}, None),
    # check_seLinuxOptions_test.go (1.31)
    (
        "selinux pod and containers",
        b.se_linux_options_1_31,
        {},
        {"securityContext": SELINUX_POD_BAD, "containers": SELINUX_OK + SELINUX_BAD},
        (
            "seLinuxOptions",
            'pod and containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: '
            'types "bar", "foo"; user may not be set; role may not be set',
        ),
    ),
    (
        "selinux pod",
        b.se_linux_options_1_31,
        {},
        {"securityContext": SELINUX_POD_BAD, "containers": SELINUX_OK},
        (
            "seLinuxOptions",
            'pod set forbidden securityContext.seLinuxOptions: type "foo"; user may not be set; '
            "role may not be set",
        ),
    ),
    (
        "selinux containers",
        b.se_linux_options_1_31,
        {},
        {"securityContext": {"seLinuxOptions": {}}, "containers": SELINUX_OK + SELINUX_BAD},
        (
            "seLinuxOptions",
            'containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: type "bar"; '
            "user may not be set; role may not be set",
        ),
    ),
    (
        "selinux bad type",
        b.se_linux_options_1_31,
        {},
        {"securityContext": {"seLinuxOptions": {"type": "bad"}}},
        ("seLinuxOptions", 'pod set forbidden securityContext.seLinuxOptions: type "bad"'),
    ),
    (
        "selinux bad user",
        b.se_linux_options_1_31,
        {},
        {"securityContext": {"seLinuxOptions": {"user": "bad"}}},
        ("seLinuxOptions", "pod set forbidden securityContext.seLinuxOptions: user may not be set"),
    ),
    (
        "selinux bad role",
        b.se_linux_options_1_31,
        {},
        {"securityContext": {"seLinuxOptions": {"role": "bad"}}},
        ("seLinuxOptions", "pod set forbidden securityContext.seLinuxOptions: role may not be set"),
    ),
    (
        "selinux 1.0 engine type",
        b.se_linux_options_1_0,
        {},
        {"containers": SELINUX_OK[3:]},
        (
            "seLinuxOptions",
            'container "d" set forbidden securityContext.seLinuxOptions: type "container_engine_t"',
        ),
    ),
    # check_runAsUser_test.go (1.35)
    (
        "runAsUser pod 0",
        r.run_as_user_1_35,
        {},
        {"securityContext": {"runAsUser": 0}, "containers": [named("a")]},
        ("runAsUser=0", "pod must not set runAsUser=0"),
    ),
    (
        "runAsUser pod 1000",
        r.run_as_user_1_35,
        {},
        {"securityContext": {"runAsUser": 1000}, "containers": [named("a")]},
        None,
    ),
    ("runAsUser pod nil", r.run_as_user_1_35, {}, {"securityContext": {}, "containers": [named("a")]}, None),
    (
        "runAsUser containers 0",
        r.run_as_user_1_35,
        {},
        {
            "securityContext": {"runAsUser": 1000},
            "containers": [
                named("a"),
                named("b", {}),
                named("c", {"runAsUser": 0}),
                named("d", {"runAsUser": 0}),
                named("e", {"runAsUser": 1}),
                named("f", {"runAsUser": 1}),
            ],
        },
        ("runAsUser=0", 'containers "c", "d" must not set runAsUser=0'),
    ),
    (
        "runAsUser containers non-zero",
        r.run_as_user_1_35,
        {},
        {"containers": [named(n, {"runAsUser": i}) for i, n in enumerate("cdef", 1)]},
        None,
    ),
    ("runAsUser host users false", r.run_as_user_1_35, {}, {"hostUsers": False}, None),
    # check_runAsNonRoot_test.go (1.35)
    (
        "runAsNonRoot none",
        r.run_as_non_root_1_35,
        {},
        {"containers": [named("a")]},
        ("runAsNonRoot != true", 'pod or container "a" must set securityContext.runAsNonRoot=true'),
    ),
    (
        "runAsNonRoot pod false",
        r.run_as_non_root_1_35,
        {},
        {"securityContext": {"runAsNonRoot": False}, "containers": [named("a")]},
        ("runAsNonRoot != true", "pod must not set securityContext.runAsNonRoot=false"),
    ),
    (
        "runAsNonRoot containers false",
        r.run_as_non_root_1_35,
        {},
        {
            "securityContext": {"runAsNonRoot": True},
            "containers": [
                named("a"),
                named("b", {}),
                named("c", {"runAsNonRoot": False}),
                named("d", {"runAsNonRoot": False}),
                named("e", {"runAsNonRoot": True}),
                named("f", {"runAsNonRoot": True}),
            ],
        },
        ("runAsNonRoot != true", 'containers "c", "d" must not set securityContext.runAsNonRoot=false'),
    ),
    (
        "runAsNonRoot fallthrough",
        r.run_as_non_root_1_35,
        {},
        {
            "containers": [
                named("a"),
                named("b", {}),
                named("d", {"runAsNonRoot": True}),
                named("e", {"runAsNonRoot": True}),
            ]
        },
        ("runAsNonRoot != true", 'pod or containers "a", "b" must set securityContext.runAsNonRoot=true'),
    ),
    ("runAsNonRoot host users false", r.run_as_non_root_1_35, {}, {"hostUsers": False}, None),
    # check_allowPrivilegeEscalation_test.go (1.25 and 1.8)
    (
        "ape 1.25 containers",
        r.allow_privilege_escalation_1_25,
        {},
        {
            "containers": [
                named("a"),
                named("b", {}),
                named("c", {"allowPrivilegeEscalation": True}),
                named("d", {"allowPrivilegeEscalation": False}),
            ]
        },
        (
            "allowPrivilegeEscalation != false",
            'containers "a", "b", "c" must set securityContext.allowPrivilegeEscalation=false',
        ),
    ),
    (
        "ape 1.25 windows",
        r.allow_privilege_escalation_1_25,
        {},
        {"os": {"name": "windows"}, "containers": [named("a")]},
        None,
    ),
    (
        "ape 1.25 linux",
        r.allow_privilege_escalation_1_25,
        {},
        {"os": {"name": "linux"}, "containers": [named("a")]},
        (
            "allowPrivilegeEscalation != false",
            'container "a" must set securityContext.allowPrivilegeEscalation=false',
        ),
    ),
    (
        "ape 1.8 containers",
        r.allow_privilege_escalation_1_8,
        {},
        {
            "containers": [
                named("a"),
                named("b", {}),
                named("c", {"allowPrivilegeEscalation": True}),
                named("d", {"allowPrivilegeEscalation": False}),
            ]
        },
        (
            "allowPrivilegeEscalation != false",
            'containers "a", "b", "c" must set securityContext.allowPrivilegeEscalation=false',
        ),
    ),
    # check_capabilities_restricted_test.go (1.25 and 1.22)
    ("caps 1.25", r.capabilities_restricted_1_25, {}, CAPS, ("unrestricted capabilities", CAPS_DETAIL)),
    (
        "caps 1.25 windows",
        r.capabilities_restricted_1_25,
        {},
        {"os": {"name": "windows"}, "containers": [named("a")]},
        None,
    ),
    (
        "caps 1.25 linux",
        r.capabilities_restricted_1_25,
        {},
        {"os": {"name": "linux"}, "containers": [named("a")]},
        ("unrestricted capabilities", 'container "a" must set securityContext.capabilities.drop=["ALL"]'),
    ),
    ("caps 1.22", r.capabilities_restricted_1_22, {}, CAPS, ("unrestricted capabilities", CAPS_DETAIL)),
    # check_capabilities_baseline_test.go
    (
        "caps baseline",
        b.capabilities_baseline,
        {},
        {
            "containers": [
                named("a", {"capabilities": {"add": ["FOO", "BAR"]}}),
                named("b", {"capabilities": {"add": ["BAR", "BAZ"]}}),
            ]
        },
        (
            "non-default capabilities",
            'containers "a", "b" must not include "BAR", "BAZ", "FOO" in securityContext.capabilities.add',
        ),
    ),
    (
        "caps baseline defaults",
        b.capabilities_baseline,
        {},
        {"containers": [named("a", {"capabilities": {"add": ["CHOWN", "NET_BIND_SERVICE"]}})]},
        None,
    ),
    # check_hostPorts_test.go
    (
        "host port one",
        b.host_ports,
        {},
        {
            "containers": [
                {"name": "a", "ports": [{"hostPort": 0}]},
                {"name": "b", "ports": [{"hostPort": 0}, {"hostPort": 20}]},
            ]
        },
        ("hostPort", 'container "b" uses hostPort 20'),
    ),
    (
        "host ports many",
        b.host_ports,
        {},
        {
            "containers": [
                {"name": "a", "ports": [{"hostPort": 0}]},
                {"name": "b", "ports": [{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 20}]},
                {"name": "c", "ports": [{"hostPort": 0}, {"hostPort": 10}, {"hostPort": 30}]},
            ]
        },
        ("hostPort", 'containers "b", "c" use hostPorts 10, 20, 30'),
    ),
    # check_procMount_baseline_test.go (1.35) and check_procMount_restricted_test.go
    (
        "procMount baseline",
        b.proc_mount_1_35_baseline,
        {},
        {"containers": PROC_MOUNT_CONTAINERS, "hostUsers": True},
        ("procMount", PROC_MOUNT),
    ),
    (
        "procMount baseline userns",
        b.proc_mount_1_35_baseline,
        {},
        {"containers": PROC_MOUNT_CONTAINERS, "hostUsers": False},
        None,
    ),
    (
        "procMount restricted",
        b.proc_mount,
        {},
        {"containers": PROC_MOUNT_CONTAINERS, "hostUsers": True},
        ("procMount", PROC_MOUNT),
    ),
    (
        "procMount restricted userns",
        b.proc_mount,
        {},
        {"containers": PROC_MOUNT_CONTAINERS, "hostUsers": False},
        ("procMount", PROC_MOUNT),
    ),
    # check_hostNamespaces_test.go, check_privileged_test.go, check_hostPathVolumes_test.go
    (
        "host namespaces",
        b.host_namespaces,
        {},
        {"hostNetwork": True, "hostIPC": True, "hostPID": True, "containers": []},
        ("host namespaces", "hostNetwork=true, hostPID=true, hostIPC=true"),
    ),
    (
        "privileged",
        b.privileged,
        {},
        {
            "containers": [
                named("a"),
                named("b", {}),
                named("c", {"privileged": False}),
                named("d", {"privileged": True}),
                named("e", {"privileged": True}),
            ]
        },
        ("privileged", 'containers "d", "e" must not set securityContext.privileged=true'),
    ),
    (
        "hostPath volumes",
        b.host_path_volumes,
        {},
        {
            "containers": [],
            "volumes": [
                {"name": "a", "hostPath": {"path": ""}},
                {"name": "b", "hostPath": {"path": ""}},
                {"name": "c", "emptyDir": {}},
            ],
        },
        ("hostPath volumes", 'volumes "a", "b"'),
    ),
    # check_restrictedVolumes_test.go: every volume source, in the table's order
    (
        "restricted volumes",
        r.restricted_volumes,
        {},
        {"containers": [], "volumes": VOLUMES},
        ("restricted volume types", VOLUMES_DETAIL),
    ),
    # check_windowsHostProcess_test.go
    (
        "windows host process",
        b.windows_host_process,
        {},
        {
            "securityContext": windows(True),
            "containers": [
                named("a"),
                named("b", {}),
                named("c", windows(None)),
                named("d", windows(False)),
                named("e", windows(True)),
                named("f", windows(True)),
            ],
        },
        (
            "hostProcess",
            'pod and containers "e", "f" must not set securityContext.windowsOptions.hostProcess=true',
        ),
    ),
    # check_sysctls_test.go
    (
        "sysctls forbidden",
        b.sysctls_1_0,
        {},
        {"securityContext": {"sysctls": [{"name": "a"}, {"name": "b"}]}},
        ("forbidden sysctls", "a, b"),
    ),
    (
        "sysctls allowed",
        b.sysctls_1_0,
        {},
        {"securityContext": {"sysctls": [{"name": "net.ipv4.ip_local_port_range"}]}},
        None,
    ),
    (
        "sysctls 1.27 reserved ports",
        b.sysctls_1_27,
        {},
        {"securityContext": {"sysctls": [{"name": "net.ipv4.ip_local_reserved_ports"}]}},
        None,
    ),
    (
        "sysctls 1.0 reserved ports",
        b.sysctls_1_0,
        {},
        {"securityContext": {"sysctls": [{"name": "net.ipv4.ip_local_reserved_ports"}]}},
        ("forbidden sysctls", "net.ipv4.ip_local_reserved_ports"),
    ),
    # check_hostProbesAndhostLifecycle_test.go
    (
        "probe host",
        b.host_probes_and_lifecycle,
        {},
        {
            "containers": [
                {"name": "a", "livenessProbe": {"httpGet": {"host": "evil.example", "port": 80}}},
                {"name": "b", "lifecycle": {"preStop": {"tcpSocket": {"host": "1.2.3.4", "port": 1}}}},
            ]
        },
        (
            "probe or lifecycle host",
            'containers "a", "b" use probe or lifecycle hosts "1.2.3.4", "evil.example"',
        ),
    ),
    (
        "probe no host",
        b.host_probes_and_lifecycle,
        {},
        {"containers": [{"name": "a", "livenessProbe": {"httpGet": {"port": 80}}}]},
        None,
    ),
]


@pytest.mark.parametrize(
    ("check", "annotations", "spec", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_kube_check_tables(
    check: CheckFn, annotations: dict[str, str], spec: dict[str, Any], expected: tuple[str, str] | None
) -> None:
    assert check({"name": "p", "annotations": annotations}, spec) == expected


KUBECTL_RUN_PRIVILEGED = {
    "containers": [{"name": "p1", "image": "busybox", "securityContext": {"privileged": True}}]
}


def test_restricted_lists_every_failed_check_in_kubes_order() -> None:
    failures = evaluate(LevelVersion(RESTRICTED, LATEST), {}, KUBECTL_RUN_PRIVILEGED)
    assert forbidden_detail(failures) == (
        'privileged (container "p1" must not set securityContext.privileged=true), '
        'allowPrivilegeEscalation != false (container "p1" must set '
        "securityContext.allowPrivilegeEscalation=false), "
        'unrestricted capabilities (container "p1" must set securityContext.capabilities.drop=["ALL"]), '
        'runAsNonRoot != true (pod or container "p1" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or container "p1" must set securityContext.seccompProfile.type to '
        '"RuntimeDefault" '
        'or "Localhost")'
    )
    assert [reason for reason, _ in evaluate(LevelVersion(BASELINE, LATEST), {}, KUBECTL_RUN_PRIVILEGED)] == [
        "privileged"
    ]
    assert evaluate(LevelVersion(PRIVILEGED, LATEST), {}, KUBECTL_RUN_PRIVILEGED) == []


def test_versions_choose_the_checks_of_their_time() -> None:
    bare = {"containers": [{"name": "a"}]}
    reasons = [reason for reason, _ in evaluate(LevelVersion(RESTRICTED, 0), {}, bare)]
    assert reasons == [
        "runAsNonRoot != true"
    ]  # v1.0: no allowPrivilegeEscalation, capabilities or seccomp yet
    assert len(evaluate(LevelVersion(RESTRICTED, 99), {}, bare)) == 4  # a future version is the newest
    host_path = {"containers": [{"name": "a"}], "volumes": [{"name": "h", "hostPath": {"path": "/"}}]}
    assert [reason for reason, _ in evaluate(LevelVersion(BASELINE, LATEST), {}, host_path)] == [
        "hostPath volumes"
    ]
    restricted = [reason for reason, _ in evaluate(LevelVersion(RESTRICTED, LATEST), {}, host_path)]
    assert "hostPath volumes" not in restricted and "restricted volume types" in restricted


def test_namespace_labels_make_the_policy() -> None:
    prefix = "pod-security.kubernetes.io/"
    policy, errors = policy_to_evaluate(
        {prefix + "enforce": "baseline", prefix + "enforce-version": "v1.29"}, Policy()
    )
    assert errors == []
    assert str(policy.enforce) == "baseline:v1.29"
    assert str(policy.warn) == "baseline:v1.29"  # warn follows a stricter explicit enforce
    assert str(policy.audit) == "privileged:latest"
    policy, errors = policy_to_evaluate(
        {prefix + "enforce": "bogus", prefix + "warn": "nope", prefix + "audit-version": "1.2"}, Policy()
    )
    assert str(policy.enforce) == "restricted:latest"  # fails closed
    assert policy.warn.level == PRIVILEGED  # fails open
    assert errors == [
        (prefix + "enforce", "bogus", "must be one of privileged, baseline, restricted"),
        (prefix + "audit-version", "1.2", 'must be "latest" or "v1.x"'),
        (prefix + "warn", "nope", "must be one of privileged, baseline, restricted"),
    ]


def test_admission_configuration_file(tmp_path: Path) -> None:
    inline = tmp_path / "admission.yaml"
    inline.write_text(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n"
        "- name: PodSecurity\n  configuration:\n    apiVersion: pod-security.admission.config.k8s.io/v1\n"
        "    kind: PodSecurityConfiguration\n"
        "    defaults: {enforce: baseline, warn: restricted, warn-version: v1.30}\n"
        "    exemptions: {usernames: [ci], namespaces: [kube-system], runtimeClasses: [kata]}\n"
    )
    config = load(inline)
    assert (
        str(config.defaults.enforce) == "baseline:latest" and str(config.defaults.warn) == "restricted:v1.30"
    )
    assert config.exempt_usernames == {"ci"} and config.exempt_namespaces == {"kube-system"}
    assert config.exempt_runtime_classes == {"kata"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: PodSecurityConfiguration\ndefaults: {enforce: strict}\n")
    with pytest.raises(ValueError, match=r"bad.yaml: defaults.enforce: 'strict' must be one of"):
        load(bad)


def test_only_significant_pod_updates_are_judged() -> None:
    from apiserver.admission.podsecurity.admission import significant_update

    old = {"metadata": {}, "spec": {"containers": [{"name": "a", "image": "x:1"}], "ephemeralContainers": []}}
    labels_only = {**old, "metadata": {"labels": {"l": "v"}}}
    assert not significant_update(labels_only, old)
    assert significant_update({"spec": {"containers": [{"name": "a", "image": "x:2"}]}}, old)
    assert significant_update({"spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b"}]}}, old)
    debug = {"spec": {**old["spec"], "ephemeralContainers": [{"name": "dbg", "image": "busybox"}]}}
    assert significant_update(debug, old)
    seccomp = {"metadata": {"annotations": {SCP + "a": "unconfined"}}, "spec": old["spec"]}
    assert significant_update(seccomp, old)
