"""Decode files holding Kubernetes objects: YAML (one or many documents) or JSON, with
`kind: List` (or `*List`) objects flattened into their items, as kubectl writes them."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from kubenode.model.errors import ValidationError


def _flatten(obj: Any, source: str, where: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if obj is None:
        return
    if not isinstance(obj, Mapping):
        raise ValidationError(source, where, f"must be a Kubernetes object, got {type(obj).__name__}")
    kind = obj.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and "items" in obj:
        items = obj.get("items") or []
        if not isinstance(items, list):
            raise ValidationError(source, f"{where}.items" if where else "items", "must be a list")
        for i, item in enumerate(items):
            yield from _flatten(item, source, f"{where}.items[{i}]" if where else f"items[{i}]")
        return
    yield where, obj


def decode_objects(text: str, source: str) -> list[tuple[str, Mapping[str, Any]]]:
    """(location, object) pairs; location names the document/item, e.g. `document 2` or `items[3]`."""
    try:
        if text.lstrip().startswith(("{", "[")):
            decoded = json.loads(text)
            docs = decoded if isinstance(decoded, list) else [decoded]
        else:
            docs = list(yaml.safe_load_all(text))
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ValidationError(source, "", f"cannot parse: {exc}") from None
    result: list[tuple[str, Mapping[str, Any]]] = []
    for index, doc in enumerate(docs):
        where = f"document {index + 1}" if len(docs) > 1 else ""
        result.extend(_flatten(doc, source, where))
    return result


def load_objects(path: Path) -> list[tuple[str, Mapping[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(str(path), "", f"cannot read: {exc}") from None
    return decode_objects(text, str(path))
