"""Kubernetes' CEL environment for device selectors, on cel-expr-python (Google's cel-cpp).

Flow: `compile_selector(text)` checks the length limit, compiles and type-checks once per
expression text (cached) and returns a Selector; `Selector.matches(device)` evaluates it on one
device's `DeviceData` and returns the boolean, or raises SelectorError on a runtime error (kube's
allocator then treats the device as not matching). The API server can call `compile_selector` to
refuse a bad expression with the field named.

The variable is `device` with `driver`, `attributes[domain].id` and `capacity[domain].id`, as in
dynamic-resource-allocation/cel. Kube's extension functions are written here: `quantity()`,
`isQuantity()` and Quantity's compareTo/isGreaterThan/isLessThan/add/sub/asInteger/
asApproximateFloat/sign/isInteger; `semver()`, `isSemver()` and Semver's compareTo/isGreaterThan/
isLessThan/major/minor/patch; `cel.bind` and the strings extension come with the runtime.

cel-expr-python cannot carry an opaque Python object through an expression, so a Quantity is a
one-entry map {QUANTITY_KEY: text} and a Semver a one-item list [text]: distinct CEL kinds, so
overloads dispatch on them; the functions parse the text exactly (cached). An attributes or
capacity domain the device lacks is an empty map, as in kube: the domains an expression looks up
by name (`attributes["x"]`) are filled in empty for that expression, so `device.attributes["x"].y`
fails as "no such key" and `has(...)` is false, instead of the domain lookup failing.

Limits: the 10 Ki length limit (resourceapi.CELSelectorExpressionMaxLength), and kube's cost
limit (1,000,000) against a static worst-case estimate (kubenode/dra/celcost.py), as the runtime
has no cost tracker. Not available: kube's regex `find`/`findAll`, IP/CIDR/URL libraries, ext.Lists
and `includes()` (gated in kube).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_strings

from kubenode.dra import semver
from kubenode.dra.celcost import estimate
from kubenode.dra.celrefs import Path, references
from kubenode.dra.types import MAX_SELECTOR_LENGTH, Device
from kubenode.model.quantity import QuantityError, to_fraction

QUANTITY_KEY = "kubenode.io/quantity"
MAX_COST = 1_000_000  # resourceapi.CELSelectorExpressionMaxCost, checked against the static estimate

_QUANTITY = cel.Type.Map(cel.Type.STRING, cel.Type.STRING)
_SEMVER = cel.Type.List(cel.Type.STRING)
# `attributes["domain"]` / `capacity['domain']`: the domains an expression looks up by name
_DOMAIN_LOOKUP = re.compile(r"""(?:attributes|capacity)\s*\[\s*(?:'([^'\\]*)'|"([^"\\]*)")\s*\]""")
# cel-cpp's checker refuses a `dyn` comprehension range (`device.attributes["d"].exists(...)`), which
# CEL allows; such an expression is compiled unchecked and its overloads resolve at runtime.
_DYN_RANGE = "cannot be the range of a comprehension"


class SelectorError(ValueError):
    """A selector that does not compile, or failed at runtime on one device."""


def _q(value: Mapping[str, str]) -> Fraction:
    return to_fraction(value[QUANTITY_KEY])


def _quantity(text: str) -> dict[str, str]:
    to_fraction(text)  # raises QuantityError: a runtime error, as kube's quantity() on bad text
    return {QUANTITY_KEY: text}


def _is_quantity(text: str) -> bool:
    try:
        to_fraction(text)
    except QuantityError:
        return False
    return True


def _cmp(a: Fraction, b: Fraction) -> int:
    return (a > b) - (a < b)


def _q_plus(a: Mapping[str, str], b: Fraction | int) -> dict[str, str]:
    total = _q(a) + b
    return {QUANTITY_KEY: str(total.numerator) if total.denominator == 1 else f"{float(total)!r}"}


def _as_integer(a: Mapping[str, str]) -> int:
    value = _q(a)
    if value.denominator != 1 or abs(value) > 2**63 - 1:
        raise ValueError("cannot convert value to integer")
    return int(value)


def _semver(text: str, relaxed: bool = False) -> list[str]:
    text = semver.normalize(text) if relaxed else text
    semver.parse(text)
    return [text]


def _sv_cmp(a: list[str], b: list[str]) -> int:
    return semver.compare(a[0], b[0])


def _overload(name: str, result: Any, params: list[Any], impl: Any, member: bool = True) -> Any:
    return cel.Overload(name, result, params, is_member=member, impl=impl)


def _functions() -> list[Any]:
    q, s, b, i = _QUANTITY, _SEMVER, cel.Type.BOOL, cel.Type.INT
    string, double = cel.Type.STRING, cel.Type.DOUBLE
    decl = cel.FunctionDecl
    return [
        decl("quantity", [_overload("string_to_quantity", q, [string], _quantity, False)]),
        decl("isQuantity", [_overload("is_quantity_string", b, [string], _is_quantity, False)]),
        decl(
            "semver",
            [
                _overload("string_to_semver", s, [string], _semver, False),
                _overload("string_bool_to_semver", s, [string, b], _semver, False),
            ],
        ),
        decl(
            "isSemver",
            [
                _overload("is_semver_string", b, [string], semver.is_semver, False),
                _overload("is_semver_string_bool", b, [string, b], semver.is_semver, False),
            ],
        ),
        decl(
            "compareTo",
            [
                _overload("quantity_compareTo", i, [q, q], lambda a, o: _cmp(_q(a), _q(o))),
                _overload("semver_compareTo", i, [s, s], _sv_cmp),
            ],
        ),
        decl(
            "isGreaterThan",
            [
                _overload("quantity_isGreaterThan", b, [q, q], lambda a, o: _q(a) > _q(o)),
                _overload("semver_isGreaterThan", b, [s, s], lambda a, o: _sv_cmp(a, o) > 0),
            ],
        ),
        decl(
            "isLessThan",
            [
                _overload("quantity_isLessThan", b, [q, q], lambda a, o: _q(a) < _q(o)),
                _overload("semver_isLessThan", b, [s, s], lambda a, o: _sv_cmp(a, o) < 0),
            ],
        ),
        decl(
            "add",
            [
                _overload("quantity_add", q, [q, q], lambda a, o: _q_plus(a, _q(o))),
                _overload("quantity_add_int", q, [q, i], _q_plus),
            ],
        ),
        decl(
            "sub",
            [
                _overload("quantity_sub", q, [q, q], lambda a, o: _q_plus(a, -_q(o))),
                _overload("quantity_sub_int", q, [q, i], lambda a, o: _q_plus(a, -o)),
            ],
        ),
        decl("asInteger", [_overload("quantity_asInteger", i, [q], _as_integer)]),
        decl(
            "asApproximateFloat",
            [_overload("quantity_asApproximateFloat", double, [q], lambda a: float(_q(a)))],
        ),
        decl("sign", [_overload("quantity_sign", i, [q], lambda a: _cmp(_q(a), Fraction(0)))]),
        decl("isInteger", [_overload("quantity_isInteger", b, [q], lambda a: _q(a).denominator == 1)]),
        decl("major", [_overload("semver_major", i, [s], lambda a: semver.parse(a[0])[0])]),
        decl("minor", [_overload("semver_minor", i, [s], lambda a: semver.parse(a[0])[1])]),
        decl("patch", [_overload("semver_patch", i, [s], lambda a: semver.parse(a[0])[2])]),
    ]


@functools.cache
def _env() -> Any:
    return cel.NewEnv(
        variables={"device": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)},
        functions=_functions(),
        extensions=[ext_bindings.ExtBindings(), ext_strings.ExtStrings()],
    )


class DeviceData:
    """One device as the `device` variable, built once and reused by every selector evaluated on it.

    Each set of looked-up domains gets its own activation, with just those domains filled in
    empty where the device lacks them: `"x" in device.attributes` stays false elsewhere."""

    __slots__ = ("_activations", "data")

    def __init__(self, driver: str, device: Device) -> None:
        attributes: dict[str, dict[str, Any]] = {}
        for domain, values in device.attributes.items():
            attributes[domain] = {
                ident: [value] if kind == "version" else value for ident, (kind, value) in values.items()
            }
        capacity = {
            domain: {ident: {QUANTITY_KEY: text} for ident, text in values.items()}
            for domain, values in device.capacity.items()
        }
        self.data: dict[str, Any] = {"driver": driver, "attributes": attributes, "capacity": capacity}
        self._activations: dict[frozenset[str], Any] = {}

    def activation(self, domains: frozenset[str]) -> Any:
        # Keyed by the domains the device lacks: most selectors look up domains it has, and share one.
        data = self.data
        missing = frozenset(d for d in domains if d not in data["attributes"] or d not in data["capacity"])
        found = self._activations.get(missing)
        if found is None:
            if missing:
                empty: dict[str, Any] = {d: {} for d in missing}
                data = {
                    "driver": data["driver"],
                    "attributes": {**empty, **data["attributes"]},
                    "capacity": {**empty, **data["capacity"]},
                }
            found = self._activations[missing] = _env().Activation({"device": data})
        return found


class Selector:
    """One compiled selector expression."""

    def __init__(
        self, text: str, program: Any, domains: frozenset[str], cost: int, paths: tuple[Path, ...] | None
    ) -> None:
        self.text = text
        self.cost = cost  # the estimated worst case (kubenode/dra/celcost.py)
        self.paths = paths  # the device values it reads, if that can be told (kubenode/dra/celrefs.py)
        self._program = program
        self._domains = domains

    def matches(self, device: DeviceData) -> bool:
        value = self._program.eval(device.activation(self._domains))
        if value.type() == cel.Type.ERROR:
            raise SelectorError(f"CEL runtime error: {value.value()}")
        result = value.value()
        if not isinstance(result, bool):
            raise SelectorError(f"CEL result of type {type(result).__name__} could not be converted to bool")
        return result


@functools.lru_cache(maxsize=4096)
def compile_selector(text: str) -> Selector:
    """The compiled selector for an expression text; SelectorError says why it does not compile."""
    if len(text) > MAX_SELECTOR_LENGTH:
        raise SelectorError(f"expression is longer than {MAX_SELECTOR_LENGTH} characters")
    try:
        program = _env().compile(text)
    except RuntimeError as exc:
        if _DYN_RANGE not in str(exc):
            raise SelectorError(f"compilation failed: {exc}") from None
        program = _env().compile(text, disable_check=True)
    else:
        kind = program.return_type()
        if kind not in (cel.Type.BOOL, cel.Type.DYN):
            raise SelectorError(f"must evaluate to bool or the unknown type, not {kind.name()}")
    cost = estimate(program.serialize())
    if cost > MAX_COST:
        raise SelectorError(f"estimated cost {cost} exceeds the limit of {MAX_COST}")
    domains = frozenset(a or b for a, b in _DOMAIN_LOOKUP.findall(text))
    return Selector(text, program, domains, cost, references(program.serialize()))
