"""The check registry and evaluation (kube's policy.NewEvaluator / EvaluatePod / AggregateCheckResults).

Checks run in kube's order (its source files' order): at baseline, the baseline checks; at restricted, the
baseline checks that no restricted check replaces, then the restricted ones. A version older than a check's
first version skips it; a version past the newest known (or "latest") uses the newest form of each check.
The forbidden detail joins `reason (detail)` of each failed check with ", ".
"""

from __future__ import annotations

from . import checks_baseline as b
from . import checks_restricted as r
from .common import Check, Obj
from .levels import BASELINE, LATEST, PRIVILEGED, RESTRICTED, LevelVersion

CHECKS = (
    Check(
        "allowPrivilegeEscalation",
        RESTRICTED,
        ((8, r.allow_privilege_escalation_1_8), (25, r.allow_privilege_escalation_1_25)),
    ),
    Check("appArmorProfile", BASELINE, ((0, b.app_armor_profile),)),
    Check("capabilities_baseline", BASELINE, ((0, b.capabilities_baseline),), overlap=True),
    Check(
        "capabilities_restricted",
        RESTRICTED,
        ((22, r.capabilities_restricted_1_22), (25, r.capabilities_restricted_1_25)),
    ),
    Check("hostNamespaces", BASELINE, ((0, b.host_namespaces),)),
    Check("hostPathVolumes", BASELINE, ((0, b.host_path_volumes),), overlap=True),
    Check("hostPorts", BASELINE, ((0, b.host_ports),)),
    Check("hostProbesAndHostLifecycle", BASELINE, ((34, b.host_probes_and_lifecycle),)),
    Check("privileged", BASELINE, ((0, b.privileged),)),
    Check("procMount", BASELINE, ((0, b.proc_mount), (35, b.proc_mount_1_35_baseline)), overlap=True),
    Check("procMount_restricted", RESTRICTED, ((0, b.proc_mount),)),
    Check("restrictedVolumes", RESTRICTED, ((0, r.restricted_volumes),)),
    Check("runAsNonRoot", RESTRICTED, ((0, r.run_as_non_root), (35, r.run_as_non_root_1_35))),
    Check("runAsUser", RESTRICTED, ((23, r.run_as_user), (35, r.run_as_user_1_35))),
    Check("seLinuxOptions", BASELINE, ((0, b.se_linux_options_1_0), (31, b.se_linux_options_1_31))),
    Check(
        "seccompProfile_baseline",
        BASELINE,
        ((0, b.seccomp_baseline_annotations), (19, b.seccomp_baseline)),
        overlap=True,
    ),
    Check(
        "seccompProfile_restricted",
        RESTRICTED,
        ((19, r.seccomp_restricted_1_19), (25, r.seccomp_restricted_1_25)),
    ),
    Check(
        "sysctls",
        BASELINE,
        ((0, b.sysctls_1_0), (27, b.sysctls_1_27), (29, b.sysctls_1_29), (32, b.sysctls_1_32)),
    ),
    Check("windowsHostProcess", BASELINE, ((0, b.windows_host_process),)),
)
NEWEST = max(minor for check in CHECKS for minor, _ in check.versions)


def _applies(check: Check, level: str) -> bool:
    if check.level == RESTRICTED:
        return level == RESTRICTED
    return level == BASELINE or not check.overlap


def evaluate(lv: LevelVersion, meta: Obj, spec: Obj) -> list[tuple[str, str]]:
    """The (reason, detail) of each check the pod fails at this level and version, in kube's order."""
    if lv.level == PRIVILEGED:
        return []
    minor = NEWEST if lv.minor == LATEST or lv.minor > NEWEST else lv.minor
    ordered = [c for c in CHECKS if c.level == BASELINE and _applies(c, lv.level)]
    ordered += [c for c in CHECKS if c.level == RESTRICTED and _applies(c, lv.level)]
    failures = []
    for check in ordered:
        usable = [fn for first, fn in check.versions if first <= minor]
        if usable and (result := usable[-1](meta, spec)) is not None:
            failures.append(result)
    return failures


def forbidden_detail(failures: list[tuple[str, str]]) -> str:
    return ", ".join(f"{reason} ({detail})" if detail else reason for reason, detail in failures)


def forbidden_reason(failures: list[tuple[str, str]]) -> str:
    return ", ".join(reason for reason, _ in failures)
