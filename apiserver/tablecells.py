"""Cell helpers shared by the Table printers: column definitions, kube's AGE text, object accessors."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

Obj = Mapping[str, Any]
NONE = "<none>"

NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although some resources "
    "may allow a client to request the generation of an appropriate name automatically. Name is primarily "
    "intended for creation idempotence and configuration definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
AGE_DESCRIPTION = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. "
    "It is represented in RFC3339 form and is in UTC. Populated by the system. Read-only."
)


def column(
    name: str, description: str = "", *, priority: int = 0, fmt: str = "", kind: str = "string"
) -> dict[str, Any]:
    return {"name": name, "type": kind, "format": fmt, "description": description, "priority": priority}


NAME = column("Name", NAME_DESCRIPTION, fmt="name")
AGE = column("Age", AGE_DESCRIPTION)


def parse_time(value: Any) -> datetime | None:
    """RFC 3339 with or without fraction (MicroTime has six digits); None when missing or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration, the AGE text kubectl shows."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = hours // 24 // 365, (hours // 24) % 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def since(value: Any, now: datetime) -> str:
    """kube's translateTimestampSince: `<unknown>` for a missing time."""
    when = parse_time(value)
    return "<unknown>" if when is None else human_duration((now - when).total_seconds())


def meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def spec(obj: Obj) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def status(obj: Obj) -> Mapping[str, Any]:
    return obj.get("status") or {}
