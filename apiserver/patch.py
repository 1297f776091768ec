"""PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

`apply_patch(content_type, original, patch, kind)` returns the patched object or raises an
APIError: 400 for an unreadable patch, 422 for a JSON patch that cannot be applied (kube's
patch handler answers those two the same way). The strategic merge lives in `smp.py`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from apiserver.smp import strategic_merge
from apiserver.status import APIError, bad_request

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (MERGE_PATCH, JSON_PATCH, STRATEGIC_PATCH, APPLY_PATCH)


def merge_patch(original: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null deletes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(original) if isinstance(original, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unprocessable(message: str) -> APIError:
    return APIError(422, "Invalid", message)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _unprocessable(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str], op: str, path: str) -> tuple[Any, str]:
    target = doc
    for part in parts[:-1]:
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            raise _unprocessable(f'{op} operation does not apply: doc is missing path: "{path}"')
    return target, parts[-1]


def _index(container: list[Any], token: str, op: str, path: str, *, adding: bool) -> int:
    if adding and token == "-":
        return len(container)
    if not token.isdigit():
        raise _unprocessable(f'{op} operation does not apply: doc is missing path: "{path}"')
    index = int(token)
    if index > len(container) or (not adding and index == len(container)):
        raise _unprocessable(f'{op} operation does not apply: doc is missing path: "{path}"')
    return index


def _get(doc: Any, path: str, op: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent, token = _parent(doc, parts, op, path)
    if isinstance(parent, dict) and token in parent:
        return parent[token]
    if isinstance(parent, list):
        return parent[_index(parent, token, op, path, adding=False)]
    raise _unprocessable(f'{op} operation does not apply: doc is missing path: "{path}"')


def _remove(doc: Any, path: str, op: str) -> Any:
    parts = _pointer(path)
    if not parts:
        raise _unprocessable("cannot remove the whole document")
    parent, token = _parent(doc, parts, op, path)
    if isinstance(parent, dict) and token in parent:
        return parent.pop(token)
    if isinstance(parent, list):
        return parent.pop(_index(parent, token, op, path, adding=False))
    raise _unprocessable(f'{op} operation does not apply: doc is missing path: "{path}"')


def _add(doc: Any, path: str, value: Any, op: str, *, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent, token = _parent(doc, parts, op, path)
    if isinstance(parent, dict):
        if replace and token not in parent:
            raise _unprocessable(f'replace operation does not apply: doc is missing key: "{path}"')
        parent[token] = value
    elif isinstance(parent, list):
        index = _index(parent, token, op, path, adding=not replace)
        if replace:
            parent[index] = value
        else:
            parent.insert(index, value)
    else:
        raise _unprocessable(f'{op} operation does not apply: doc is missing path: "{path}"')
    return doc


def json_patch(original: Any, operations: Any) -> Any:
    """RFC 6902 over a deep copy of original."""
    if not isinstance(operations, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(original)
    for operation in operations:
        if not isinstance(operation, Mapping) or not isinstance(operation.get("op"), str):
            raise bad_request(f"invalid JSON patch operation: {operation!r}")
        op = operation["op"]
        path = operation.get("path")
        if not isinstance(path, str):
            raise _unprocessable(f"{op} operation: missing path")
        if op in ("add", "replace", "test") and "value" not in operation:
            raise _unprocessable(f"{op} operation: missing value")
        if op == "add":
            doc = _add(doc, path, copy.deepcopy(operation["value"]), op)
        elif op == "remove":
            _remove(doc, path, op)
        elif op == "replace":
            doc = _add(doc, path, copy.deepcopy(operation["value"]), op, replace=True)
        elif op in ("move", "copy"):
            source = operation.get("from")
            if not isinstance(source, str):
                raise _unprocessable(f"{op} operation: missing from")
            value = _remove(doc, source, op) if op == "move" else copy.deepcopy(_get(doc, source, op))
            doc = _add(doc, path, value, op)
        elif op == "test":
            if _get(doc, path, op) != operation["value"]:
                raise _unprocessable(f"testing value {path} failed: test failed")
        else:
            raise bad_request(f"Unexpected kind: {op}")
    return doc


def apply_patch(content_type: str, original: Mapping[str, Any], patch: Any, kind: str) -> Any:
    if content_type == JSON_PATCH:
        return json_patch(original, patch)
    if not isinstance(patch, Mapping):
        raise bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
    if content_type == MERGE_PATCH:
        return merge_patch(original, patch)
    if content_type == STRATEGIC_PATCH:
        return strategic_merge(original, patch, kind)
    if content_type == APPLY_PATCH:
        # Server-side apply, simplified: the applied configuration is merged like a strategic merge
        # patch (lists by their merge keys); no managedFields, so no field ownership and no conflicts.
        applied = {k: v for k, v in patch.items() if k not in ("apiVersion", "kind")}
        applied.get("metadata", {}).pop("resourceVersion", None)
        return strategic_merge(original, applied, kind)
    raise APIError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(PATCH_TYPES)}",
    )
