"""What every Pod Security check shares: the result type, container walking, and kube's wording helpers."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Obj = Mapping[str, Any]
Result = tuple[str, str] | None  # (forbidden reason, detail), None when allowed
CheckFn = Callable[[Obj, Obj], Result]  # (pod metadata, pod spec) -> Result


@dataclass(frozen=True)
class Check:
    id: str
    level: str  # baseline | restricted
    versions: tuple[tuple[int, CheckFn], ...]  # (minimum minor version, check), oldest first
    overlap: bool = False  # a baseline check that a restricted check replaces


def containers(spec: Obj) -> Iterator[Obj]:
    """initContainers, containers, then ephemeralContainers (kube's visitContainers order)."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


def security_context(obj: Obj) -> Obj:
    context = obj.get("securityContext")
    return context if isinstance(context, Mapping) else {}


def join_quote(items: Sequence[str]) -> str:
    return '"' + '", "'.join(items) + '"' if items else ""


def pluralize(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def containers_phrase(names: Sequence[str]) -> str:
    """`container "a"` or `containers "a", "b"`."""
    return f"{pluralize('container', 'containers', len(names))} {join_quote(names)}"


def is_windows(spec: Obj) -> bool:
    return ((spec.get("os") or {}).get("name")) == "windows"
