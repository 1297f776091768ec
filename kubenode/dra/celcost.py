"""A worst-case cost estimate of a compiled selector, in the spirit of CEL's cost estimator.

cel-expr-python has no cost tracker, so the checked expression (the `cel.expr.CheckedExpr`
proto that `Expression.serialize()` gives, wrapped in an Any) is read field by field without
the cel.expr schema (protobuf's unknown-field parser) and walked: an identifier or a field
selection costs 1, a call 1 plus its arguments, and a comprehension (all/exists/map/filter...)
its range plus, per element, its condition and step. A range is a list literal of known length,
or else an attribute/capacity map or list of at most MAX_ELEMENTS entries.

A selector whose estimate exceeds kube's limit (1,000,000) is refused when compiled, as
kube-apiserver refuses it; so no selector can keep the scheduler busy. String functions are
costed at 1, not by length: device strings are short (at most 64 bytes).
"""

from __future__ import annotations

from collections.abc import Iterator

from google.protobuf import empty_pb2  # type: ignore[import-untyped]
from google.protobuf.unknown_fields import UnknownFieldSet  # type: ignore[import-untyped]

MAX_ELEMENTS = 64  # the most entries a device's attribute map or list attribute may have (kube's estimate)

# cel.expr.Expr fields
_CONST, _IDENT, _SELECT, _CALL, _LIST, _STRUCT, _COMPREHENSION = 3, 4, 5, 6, 7, 8, 9


def _fields(data: bytes) -> Iterator[tuple[int, bytes | int]]:
    """(field number, value) of a message read without its schema (protobuf's own wire parser)."""
    holder = empty_pb2.Empty()
    holder.ParseFromString(data)
    for field in UnknownFieldSet(holder):
        yield field.field_number, field.data


def _message(data: bytes, number: int) -> list[bytes]:
    return [value for field, value in _fields(data) if field == number and isinstance(value, bytes)]


def _cost(expr: bytes) -> int:
    for field, body in _fields(expr):
        if not isinstance(body, bytes):
            continue
        if field == _CONST:
            return 0
        if field == _IDENT:
            return 1
        if field == _SELECT:
            return 1 + sum(_cost(operand) for operand in _message(body, 1))
        if field == _CALL:
            return 1 + sum(_cost(part) for part in _message(body, 1) + _message(body, 3))
        if field == _LIST:
            return 1 + sum(_cost(element) for element in _message(body, 1))
        if field == _STRUCT:
            return 1 + sum(_cost(value) for entry in _message(body, 3) for value in _message(entry, 4))
        if field == _COMPREHENSION:
            iter_range = _message(body, 2)
            elements = _list_length(iter_range[0]) if iter_range else None
            per_item = sum(_cost(part) for number in (5, 6) for part in _message(body, number))
            fixed = sum(_cost(part) for number in (2, 4, 7) for part in _message(body, number))
            return fixed + (MAX_ELEMENTS if elements is None else elements) * per_item
    return 0


def _list_length(expr: bytes) -> int | None:
    lists = _message(expr, _LIST)
    return len(_message(lists[0], 1)) if lists else None


def estimate(serialized: bytes) -> int:
    """The estimated worst-case cost of a serialized expression (`Expression.serialize()`): an Any
    holding a CheckedExpr (expr is field 4) or, compiled unchecked, a ParsedExpr (field 2)."""
    urls = [value for field, value in _fields(serialized) if field == 1 and isinstance(value, bytes)]
    payload = _message(serialized, 2)
    if not urls or not payload:
        return 0
    expr = _message(payload[0], 2 if urls[0].endswith(b"ParsedExpr") else 4)
    return _cost(expr[0]) if expr else 0
