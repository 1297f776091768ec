"""Decode files holding Kubernetes objects: YAML (one or many documents) or JSON, with
`kind: List` (or `*List`) objects flattened into their items, as kubectl writes them.

Files may come from anyone who can write a manifest, so decoding is bounded: a file is
read only up to `MAX_DOCUMENT_BYTES` (the API server's 3 MiB request limit), YAML
anchors and aliases expand only within go-yaml's budget as with kubectl (kubenode/yamlload.py:
an alias bomb of a kilobyte, which would expand to gigabytes, is refused after a few thousand
nodes), and a parse error names the line and column and the kind of problem, never the text
found there (the file might not be the user's to show).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from kubenode import yamlload
from kubenode.model.errors import ValidationError

MAX_DOCUMENT_BYTES = 3 * 2**20


def _parse_error(exc: Exception) -> str:
    """Where and what, without the offending text: YAML's own message quotes the line."""
    if isinstance(exc, json.JSONDecodeError):
        return f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        # Problems quote what was found ("found character '...'"): keep the words, drop the quotes' contents.
        problem = re.sub(r"'[^']*'", "'...'", exc.problem or exc.context or "invalid YAML")
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark else problem
    return type(exc).__name__


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
    if len(text) > MAX_DOCUMENT_BYTES:
        raise ValidationError(source, "", f"larger than {MAX_DOCUMENT_BYTES} bytes (the API server's limit)")
    try:
        if text.lstrip().startswith(("{", "[")):
            decoded = json.loads(text)
            docs = decoded if isinstance(decoded, list) else [decoded]
        else:
            docs = yamlload.load_all(text)
    except (ValueError, yaml.YAMLError, RecursionError) as exc:
        # ValueError also covers JSON's int-to-str digit limit; RecursionError, nesting thousands deep.
        raise ValidationError(source, "", f"cannot parse: {_parse_error(exc)}") from None
    result: list[tuple[str, Mapping[str, Any]]] = []
    for index, doc in enumerate(docs):
        where = f"document {index + 1}" if len(docs) > 1 else ""
        result.extend(_flatten(doc, source, where))
    return result


def read_bounded(path: Path, *, follow_symlinks: bool = True) -> str:
    """A regular file's text, at most MAX_DOCUMENT_BYTES; raises ValidationError naming the file."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ValidationError(str(path), "", "not a regular file")
            data = f.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise ValidationError(str(path), "", f"cannot read: {exc.strerror or type(exc).__name__}") from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ValidationError(
            str(path), "", f"larger than {MAX_DOCUMENT_BYTES} bytes (the API server's limit)"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(str(path), "", f"not UTF-8 (byte {exc.start})") from None


def load_objects(path: Path, *, follow_symlinks: bool = True) -> list[tuple[str, Mapping[str, Any]]]:
    return decode_objects(read_bounded(path, follow_symlinks=follow_symlinks), str(path))
