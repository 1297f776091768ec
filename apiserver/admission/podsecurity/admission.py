"""The PodSecurity admission plugin (kube's pod-security-admission/admission, for pods and namespaces).

Pods (create, and updates that change an image): exempt namespaces, users and runtimeClasses pass (audit
annotation `pod-security.kubernetes.io/exempt`); otherwise the namespace's policy is evaluated: `enforce`
violations refuse the pod (403 `pods "x" is forbidden: violates PodSecurity "restricted:latest": ...`),
`audit` ones become the `pod-security.kubernetes.io/audit-violations` annotation, `warn` ones a warning
(`would violate PodSecurity ...`) on an admitted request. Namespaces: bad pod-security labels are refused
(422) when created or changed; raising the enforce level warns about the existing pods that violate it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from apiserver.admission import Verdict
from apiserver.request import RequestInfo
from apiserver.status import APIError, invalid

from .checks import evaluate, forbidden_detail, forbidden_reason
from .config import Config
from .levels import (
    LABEL_PREFIX,
    MODES,
    PRIVILEGED,
    LabelError,
    LevelVersion,
    Policy,
    compare_levels,
    policy_to_evaluate,
)

EXEMPT = "pod-security.kubernetes.io/exempt"
ENFORCE_POLICY = "pod-security.kubernetes.io/enforce-policy"
AUDIT_VIOLATIONS = "pod-security.kubernetes.io/audit-violations"
IGNORED_POD_SUBRESOURCES = frozenset(
    {"exec", "attach", "binding", "eviction", "log", "portforward", "proxy", "status"}
)
MAX_PODS_TO_CHECK = 3000  # kube's namespaceMaxPodsToCheck

Obj = Mapping[str, Any]


def _meta(obj: Obj | None) -> Obj:
    return (obj or {}).get("metadata") or {}


def _spec(obj: Obj | None) -> Obj:
    return (obj or {}).get("spec") or {}


def _labels(obj: Obj | None) -> dict[str, str]:
    return dict(_meta(obj).get("labels") or {})


class PodSecurity:
    """The plugin; `namespace_labels` returns a namespace's labels (None: no such namespace), `pods` the pods
    of a namespace."""

    def __init__(
        self,
        config: Config,
        namespace_labels: Callable[[str], Mapping[str, str] | None],
        pods: Callable[[str], Iterable[Obj]],
    ) -> None:
        self.config = config
        self.namespace_labels = namespace_labels
        self.pods = pods
        self._last_policy: tuple[Mapping[str, str], tuple[Policy, list[LabelError]]] | None = None

    def validate(self, user: Any, info: RequestInfo, old: Obj | None, new: Obj | None) -> Verdict | None:
        if not info.is_resource_request or info.api_group != "" or new is None:
            return None
        if info.verb not in ("create", "update", "patch"):
            return None
        if info.resource == "pods":
            return self._pod(user, info, old, new)
        if info.resource == "namespaces" and not info.subresource:
            return self._namespace(info, old, new)
        return None

    def policy(self, labels: Mapping[str, str] | None) -> tuple[Policy, list[LabelError]]:
        return policy_to_evaluate(labels, self.config.defaults)

    def namespace_policy(self, namespace: str) -> tuple[Policy, list[LabelError]]:
        """The policy of a stored namespace. Its labels come from the watch cache, one dict per stored
        revision of the namespace, never changed in place: the last dict asked about is answered
        without parsing again (holding it keeps its id from being reused by another dict)."""
        labels = self.namespace_labels(namespace)
        last = self._last_policy
        if last is not None and last[0] is labels:
            return last[1]
        result = policy_to_evaluate(labels, self.config.defaults)
        if labels is not None:
            self._last_policy = (labels, result)
        return result

    # -- pods ---------------------------------------------------------------------------------------------

    def _pod(self, user: Any, info: RequestInfo, old: Obj | None, new: Obj) -> Verdict | None:
        if info.subresource in IGNORED_POD_SUBRESOURCES:
            return None
        if info.namespace in self.config.exempt_namespaces:
            return Verdict(audit={EXEMPT: "namespace"})
        if getattr(user, "name", "") in self.config.exempt_usernames:
            return Verdict(audit={EXEMPT: "user"})
        policy, errors = self.namespace_policy(info.namespace)
        if not errors and policy.fully_privileged():
            return None
        if old is not None and not significant_update(new, old):
            return None
        spec, meta = _spec(new), _meta(new)
        if spec.get("runtimeClassName") and spec["runtimeClassName"] in self.config.exempt_runtime_classes:
            return Verdict(audit={EXEMPT: "runtimeClass"})
        verdict = Verdict()
        if errors:
            verdict.audit["error"] = "Failed to parse policy: " + _label_errors_text(errors)
        verdict.audit[ENFORCE_POLICY] = str(policy.enforce)
        results: dict[LevelVersion, list[tuple[str, str]]] = {}

        def failures(lv: LevelVersion) -> list[tuple[str, str]]:
            if lv not in results:
                results[lv] = evaluate(lv, meta, spec)
            return results[lv]

        if enforced := failures(policy.enforce):
            name = info.name or str(meta.get("name") or "")
            subject = f'pods "{name}"' if name else "pods"
            detail = forbidden_detail(enforced)
            message = f'{subject} is forbidden: violates PodSecurity "{policy.enforce}": {detail}'
            verdict.denied = APIError(403, "Forbidden", message, {"name": name, "kind": "pods"})
        if audited := failures(policy.audit):
            verdict.audit[AUDIT_VIOLATIONS] = (
                f'would violate PodSecurity "{policy.audit}": {forbidden_detail(audited)}'
            )
        if verdict.denied is None and (warned := failures(policy.warn)):
            verdict.warnings.append(f'would violate PodSecurity "{policy.warn}": {forbidden_detail(warned)}')
        return verdict

    # -- namespaces ---------------------------------------------------------------------------------------

    def _namespace(self, info: RequestInfo, old: Obj | None, new: Obj) -> Verdict | None:
        name = str(_meta(new).get("name") or info.name)
        new_policy, new_errors = self.policy(_labels(new))
        if old is None:
            if new_errors:
                return Verdict(denied=_invalid(name, new_errors))
            return self._exempt_warning(name, new_policy, _labels(new))
        old_policy, old_errors = self.policy(_labels(old))
        if new_errors and (not old_errors or new_errors != old_errors):
            return Verdict(denied=_invalid(name, new_errors))
        if new_policy.enforce == old_policy.enforce or new_policy.enforce.level == PRIVILEGED:
            return None
        if (
            new_policy.enforce.minor == old_policy.enforce.minor
            and compare_levels(new_policy.enforce.level, old_policy.enforce.level) < 1
        ):
            return None  # relaxed at the same version: no pod can newly violate it
        if name in self.config.exempt_namespaces:
            return self._exempt_warning(name, new_policy, _labels(new))
        return Verdict(warnings=self._existing_pod_warnings(name, new_policy.enforce))

    def _exempt_warning(self, name: str, policy: Policy, labels: Mapping[str, str]) -> Verdict | None:
        if (
            name not in self.config.exempt_namespaces
            or policy.fully_privileged()
            or policy == self.config.defaults
        ):
            return None
        modes = (("enforce", policy.enforce), ("audit", policy.audit), ("warn", policy.warn))
        shown = [
            f"{mode}={lv}"
            for mode, lv in modes
            if lv.level != PRIVILEGED
            and (LABEL_PREFIX + mode in labels or LABEL_PREFIX + mode + "-version" in labels)
        ]
        text = f'namespace "{name}" is exempt from Pod Security, and the policy ({", ".join(shown)}) '
        text += "will be ignored"
        return Verdict(warnings=[text])

    def _existing_pod_warnings(self, namespace: str, enforce: LevelVersion) -> list[str]:
        pods = [
            p for p in self.pods(namespace)
            if _spec(p).get("runtimeClassName") not in self.config.exempt_runtime_classes
        ]  # fmt: skip
        total = len(pods)
        counts: dict[str, tuple[str, int]] = {}  # warning -> (first pod name, how many pods)
        for pod in pods[:MAX_PODS_TO_CHECK]:
            failed = evaluate(enforce, _meta(pod), _spec(pod))
            if failed:
                warning = forbidden_reason(failed)
                name = str(_meta(pod).get("name") or "")
                first, count = counts.get(warning, (name, 0))
                counts[warning] = (min(first, name), count + 1)
        warnings = []
        if total > MAX_PODS_TO_CHECK:
            warnings.append(
                "new PodSecurity enforce level only checked against the first "
                f"{MAX_PODS_TO_CHECK} of {total} existing pods"
            )
        if counts:
            warnings.append(
                f'existing pods in namespace "{namespace}" violate the new PodSecurity enforce level '
                f'"{enforce}"'
            )
        decorated = []
        for warning, (first, count) in counts.items():
            if count == 1:
                decorated.append(f"{first}: {warning}")
            elif count == 2:
                decorated.append(f"{first} (and 1 other pod): {warning}")
            else:
                decorated.append(f"{first} (and {count - 1} other pods): {warning}")
        return warnings + sorted(decorated)


def significant_update(new: Obj, old: Obj) -> bool:
    """kube's isSignificantPodUpdate: a container added or removed, an image or seccomp annotation changed."""
    new_spec, old_spec = _spec(new), _spec(old)
    annotations, old_annotations = _meta(new).get("annotations") or {}, _meta(old).get("annotations") or {}
    for key in ("containers", "initContainers"):
        now, before = new_spec.get(key) or [], old_spec.get(key) or []
        if len(now) != len(before):
            return True
        for container, old_container in zip(now, before, strict=True):
            if _container_changed(container, old_container, annotations, old_annotations):
                return True
    old_ephemeral = {c.get("name"): c for c in old_spec.get("ephemeralContainers") or []}
    for container in new_spec.get("ephemeralContainers") or []:
        previous = old_ephemeral.get(container.get("name"))
        if previous is None or _container_changed(container, previous, annotations, old_annotations):
            return True
    return False


def _container_changed(container: Obj, old: Obj, annotations: Obj, old_annotations: Obj) -> bool:
    if container.get("image") != old.get("image"):
        return True
    key = "container.seccomp.security.alpha.kubernetes.io/" + str(container.get("name", ""))
    return annotations.get(key) != old_annotations.get(key)


def _label_errors_text(errors: list[LabelError]) -> str:
    texts = [
        f'metadata.labels[{label}]: Invalid value: "{value}": {message}' for label, value, message in errors
    ]
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def _invalid(name: str, errors: list[LabelError]) -> APIError:
    causes = [
        (f"metadata.labels[{label}]", "FieldValueInvalid", f'Invalid value: "{value}": {message}')
        for label, value, message in errors
    ]
    return invalid("Namespace", name, causes)


__all__ = ["MODES", "PodSecurity", "significant_update"]
