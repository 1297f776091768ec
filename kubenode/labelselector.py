"""metav1.LabelSelector (matchLabels + matchExpressions) as an object: matching, and the text form.

The API server validates workload selectors against their template's labels with it, and the
controllers select the pods they own with it (apimachinery's LabelSelectorAsSelector). An empty
selector matches everything; a missing one (None) matches nothing, as kube's conversion gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def selector_problem(selector: Any) -> str:
    """Why a LabelSelector is malformed ("" when it is well formed)."""
    if not isinstance(selector, Mapping):
        return "must be an object"
    for expression in selector.get("matchExpressions") or []:
        operator = expression.get("operator")
        values = expression.get("values") or []
        if operator not in OPERATORS:
            return f'"{operator}" is not a valid label selector operator'
        if operator in ("In", "NotIn") and not values:
            return "for 'in', 'notin' operators, values set can't be empty"
        if operator in ("Exists", "DoesNotExist") and values:
            return "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
    return ""


def matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """Whether `labels` satisfy the selector (None selects nothing, {} everything)."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator")
        values = expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def is_empty(selector: Mapping[str, Any] | None) -> bool:
    return not selector or (not selector.get("matchLabels") and not selector.get("matchExpressions"))


def to_text(selector: Mapping[str, Any] | None) -> str:
    """The selector as a label-selector query string (`app=web,tier in (a,b)`), as kubectl prints it."""
    if not selector:
        return ""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator")
        values = ",".join(sorted(expression.get("values") or []))
        if operator == "In":
            parts.append(f"{key} in ({values})")
        elif operator == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif operator == "Exists":
            parts.append(key)
        elif operator == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)
