"""Which parts of a device a selector reads, when that can be told: so equal devices share one verdict.

A selector that touches `device` only as `device.driver`, `device.attributes["domain"].id`
(or `["id"]`) and `device.capacity["domain"].id` with literal names gives the same answer on two
devices that agree on those values (a missing one included). `references` returns those paths,
or None when the expression uses `device` any other way (a whole domain map, `cel.bind` of one,
a computed key, a comprehension over the maps): then every device is evaluated on its own.
Read from the serialized expression like kubenode/dra/celcost.py (cel.expr.Expr field numbers).
"""

from __future__ import annotations

from kubenode.dra.celcost import _fields, _message

Path = tuple[str, ...]  # ("driver",) or ("attributes" | "capacity", domain, id)

_IDENT, _SELECT, _CALL = 4, 5, 6
_MAPS = ("attributes", "capacity")


def _one(data: bytes, number: int) -> bytes | None:
    found = _message(data, number)
    return found[0] if found else None


def _text(data: bytes, number: int) -> str | None:
    value = _one(data, number)
    return value.decode() if value is not None else None


def _kind(expr: bytes) -> tuple[int, bytes] | None:
    for number, body in _fields(expr):
        if number in (3, _IDENT, _SELECT, _CALL, 7, 8, 9) and isinstance(body, bytes):
            return number, body
    return None


def _is_device(expr: bytes) -> bool:
    kind = _kind(expr)
    return kind is not None and kind[0] == _IDENT and _text(kind[1], 1) == "device"


def _string_constant(expr: bytes) -> str | None:
    kind = _kind(expr)
    return _text(kind[1], 6) if kind is not None and kind[0] == 3 else None


def _map_of_domain(expr: bytes) -> tuple[str, str] | None:
    """`device.attributes["domain"]` (or capacity) -> (map, domain)."""
    kind = _kind(expr)
    if kind is None or kind[0] != _CALL or _text(kind[1], 2) != "_[_]":
        return None
    args = _message(kind[1], 3)
    if len(args) != 2:
        return None
    base = _kind(args[0])
    if base is None or base[0] != _SELECT:
        return None
    operand, field = _one(base[1], 1), _text(base[1], 2)
    domain = _string_constant(args[1])
    if operand is None or field not in _MAPS or domain is None or not _is_device(operand):
        return None
    return str(field), domain


def _path(expr: bytes) -> Path | None:
    kind = _kind(expr)
    if kind is None:
        return None
    number, body = kind
    if number == _SELECT:
        operand, field = _one(body, 1), _text(body, 2)
        if operand is None or field is None:
            return None
        if field == "driver" and _is_device(operand):
            return ("driver",)
        domain_map = _map_of_domain(operand)
        return (*domain_map, field) if domain_map else None
    if number == _CALL and _text(body, 2) == "_[_]":
        args = _message(body, 3)
        if len(args) == 2:
            domain_map, ident = _map_of_domain(args[0]), _string_constant(args[1])
            if domain_map and ident is not None:
                return (*domain_map, ident)
    return None


def _walk(expr: bytes, paths: set[Path]) -> bool:
    """Collect the device paths of expr; False if `device` is used any other way."""
    path = _path(expr)
    if path is not None:
        paths.add(path)
        return True
    if _is_device(expr):
        return False
    return all(not isinstance(body, bytes) or _walk_children(body, paths) for _, body in _fields(expr))


def _walk_children(body: bytes, paths: set[Path]) -> bool:
    return all(
        not isinstance(child, bytes) or not _looks_like_expr(child) or _walk(child, paths)
        for _, child in _fields(body)
    )


def _looks_like_expr(data: bytes) -> bool:
    try:
        return _kind(data) is not None
    except Exception:  # not a message (a string or name): nothing to walk
        return False


def references(serialized: bytes) -> tuple[Path, ...] | None:
    urls = [value for number, value in _fields(serialized) if number == 1 and isinstance(value, bytes)]
    payload = _message(serialized, 2)
    if not urls or not payload:
        return None
    expr = _message(payload[0], 2 if urls[0].endswith(b"ParsedExpr") else 4)
    if not expr:
        return None
    paths: set[Path] = set()
    return tuple(sorted(paths)) if _walk(expr[0], paths) else None
