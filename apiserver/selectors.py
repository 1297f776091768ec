"""Label and field selectors, parsed as apimachinery's `labels.Parse` and `fields.ParseSelector` do.

Label selectors: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>1`, `k<1`,
joined by commas. Field selectors: `k=v`, `k==v`, `k!=v` joined by commas (`\\,` escapes), over
the fields each resource declares selectable; any other label is a 400
`field label not supported: <label>`, as the real registry answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from apiserver.status import APIError, bad_request

_KEY = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?(/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

Matcher = Callable[[Mapping[str, str]], bool]


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # =, !=, in, notin, exists, !, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        value = labels.get(self.key)
        if op == "=":
            return value == self.values[0]
        if op == "!=":
            return value != self.values[0]
        if op == "in":
            return value is not None and value in self.values
        if op == "notin":
            return value is None or value not in self.values
        if op == "exists":
            return value is not None
        if op == "!":
            return value is None
        if value is None:
            return False
        try:
            number = int(value)
        except ValueError:
            return False
        return number > int(self.values[0]) if op == "gt" else number < int(self.values[0])


@dataclass(frozen=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        # Called per watcher per committed event (twice for a MODIFIED): a plain loop, no generator.
        for requirement in self.requirements:  # noqa: SIM110 (all() over a generator costs more here)
            if not requirement.matches(labels):
                return False
        return True

    @property
    def empty(self) -> bool:
        return not self.requirements

    def exact(self, key: str) -> str | None:
        """The value `key=value` pins, if any (lets a list pick one namespace or node)."""
        for r in self.requirements:
            if r.key == key and r.operator == "=":
                return r.values[0]
        return None


EVERYTHING = Selector()


def _split_outside_parens(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def _check_key(key: str, whole: str) -> None:
    if not key or len(key) > 316 or not _KEY.match(key):
        raise bad_request(f"unable to parse requirement: invalid label key {key!r} in {whole!r}")


def _check_value(value: str, whole: str) -> None:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise bad_request(f"unable to parse requirement: invalid label value {value!r} in {whole!r}")


_SET = re.compile(r"^\s*(\S+)\s+(in|notin)\s*\((.*)\)\s*$")


def parse_label_selector(text: str | None) -> Selector:
    if not text or not text.strip():
        return EVERYTHING
    requirements = []
    for part in _split_outside_parens(text):
        term = part.strip()
        if not term:
            raise bad_request(f"found '', expected: identifier in label selector {text!r}")
        match = _SET.match(term)
        if match:
            key, op, values = match.group(1), match.group(2), match.group(3)
            items = tuple(v.strip() for v in values.split(",")) if values.strip() else ()
            _check_key(key, text)
            for value in items:
                _check_value(value, text)
            requirements.append(Requirement(key, op, items))
            continue
        for symbol, op in (("!=", "!="), ("==", "="), ("=", "="), (">", "gt"), ("<", "lt")):
            if symbol in term:
                key, value = (s.strip() for s in term.split(symbol, 1))
                _check_key(key, text)
                if op in ("gt", "lt"):
                    if not re.fullmatch(r"-?[0-9]+", value):
                        raise bad_request(
                            "unable to parse requirement: for 'Gt', 'Lt' operators, "
                            f"the value must be an integer: {text!r}"
                        )
                else:
                    _check_value(value, text)
                requirements.append(Requirement(key, op, (value,)))
                break
        else:
            if term.startswith("!"):
                key = term[1:].strip()
                _check_key(key, text)
                requirements.append(Requirement(key, "!"))
            else:
                _check_key(term, text)
                requirements.append(Requirement(term, "exists"))
    return Selector(tuple(requirements))


def _split_escaped(text: str, separator: str) -> list[str]:
    parts: list[str] = []
    current = ""
    escaped = False
    for char in text:
        if escaped:
            current += char
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == separator:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def parse_field_selector(text: str | None, supported: Collection[str]) -> Selector:
    """A field selector over `supported` labels (an unsupported one is a 400)."""
    if not text or not text.strip():
        return EVERYTHING
    requirements = []
    for term in _split_escaped(text, ","):
        found = next(
            (
                (symbol, index)
                for symbol in ("!=", "==", "=")
                if (index := _find_unescaped(term, symbol)) >= 0
            ),
            None,
        )
        if found is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        symbol, index = found
        op = "!=" if symbol == "!=" else "="
        key = _unescape(term[:index]).strip()
        value = _unescape(term[index + len(symbol) :])
        if key not in supported:
            raise APIError(400, "BadRequest", f"field label not supported: {key}")
        requirements.append(Requirement(key, op, (value,)))
    return Selector(tuple(requirements))


def _find_unescaped(text: str, symbol: str) -> int:
    index = 0
    while index < len(text):
        if text[index] == "\\":
            index += 2
            continue
        if text.startswith(symbol, index):
            return index
        index += 1
    return -1
