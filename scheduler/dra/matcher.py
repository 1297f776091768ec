"""Selector verdicts per device, cached across scheduling cycles.

Whether a device matches a selector depends on nothing but the two, so a verdict is computed
once per (device object, expression) and kept in the device's `memo` while the object lives (a
ResourceSlice update brings new device objects, and their old verdicts go with the old objects). A CEL runtime
error makes the device not match; the error is kept for `kubenode trace pod`.

A selector that reads only literal paths (`device.driver`, `device.attributes["d"].id`,
`device.capacity["d"].id`; kubenode/dra/celrefs.py) gives one verdict for all devices that agree on
those values: it is evaluated once per distinct set of values (GPUs of one model share it).

The commonest selector of all, a class's `device.driver == "<name>"`, is answered without CEL
(the same string equality; the expression is still compiled, so a bad one fails as before).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kubenode.dra.cel import DeviceData, Selector, SelectorError, compile_selector
from kubenode.dra.types import Device

_DRIVER_IS = re.compile(r"""\s*device\.driver\s*==\s*(?:'([^'\\]*)'|"([^"\\]*)")\s*""")


MAX_SHARED = 65536  # verdicts by values kept before the table starts afresh


class Matcher:
    """Verdicts live in each device's `memo` ("verdicts": expression -> bool, "data": its DeviceData,
    "errors": expression -> the runtime error), so they go with the device object."""

    def __init__(self) -> None:
        self._shared: dict[tuple[str, tuple[object, ...]], bool] = {}  # (expression, values read) -> verdict
        # expression -> the driver a plain `device.driver == "x"` compares with, or its compiled selector
        self._plans: dict[str, str | Selector | SelectorError] = {}

    def _plan(self, expression: str) -> str | Selector | SelectorError:
        plan = self._plans.get(expression)
        if plan is None:
            plain = _DRIVER_IS.fullmatch(expression)
            try:
                selector = compile_selector(expression)
            except SelectorError as exc:
                plan = exc
            else:
                plan = selector if plain is None else (plain[1] if plain[1] is not None else plain[2])
            self._plans[expression] = plan
        return plan

    def matches(self, driver: str, device: Device, expression: str) -> bool:
        verdicts = device.memo.get("verdicts")
        if verdicts is None:
            verdicts = device.memo["verdicts"] = {}
        verdict: bool | None = verdicts.get(expression)
        if verdict is None:
            verdict = verdicts[expression] = self._evaluate(driver, device, expression)
        return verdict

    def all_match(self, driver: str, device: Device, expressions: tuple[str, ...]) -> bool:
        # `matches` inlined: this runs once per device and selection when the free counts are built
        verdicts = device.memo.get("verdicts")
        if verdicts is None:
            verdicts = device.memo["verdicts"] = {}
        for expression in expressions:
            verdict = verdicts.get(expression)
            if verdict is None:
                verdict = verdicts[expression] = self._evaluate(driver, device, expression)
            if not verdict:
                return False
        return True

    def errors(self, device: Device) -> dict[str, str]:
        return dict(device.memo.get("errors") or {})

    def _evaluate(self, driver: str, device: Device, expression: str) -> bool:
        selector = self._plan(expression)
        if isinstance(selector, str):
            return driver == selector
        if isinstance(selector, SelectorError):
            device.memo.setdefault("errors", {})[expression] = str(selector)
            return False
        key = None
        if selector.paths is not None:
            key = (expression, tuple([_value(driver, device, path) for path in selector.paths]))
            shared = self._shared.get(key)
            if shared is not None:
                return shared
        data = device.memo.get("data")
        if data is None:
            data = device.memo["data"] = DeviceData(driver, device)
        try:
            verdict = selector.matches(data)
        except SelectorError as exc:
            device.memo.setdefault("errors", {})[expression] = str(exc)
            verdict = False
        if key is not None:
            if len(self._shared) >= MAX_SHARED:
                self._shared.clear()
            self._shared[key] = verdict
        return verdict


def _value(driver: str, device: Device, path: tuple[str, ...]) -> object:
    if path[0] == "driver":
        return driver
    values: Mapping[str, Mapping[str, object]] = (
        device.attributes if path[0] == "attributes" else device.capacity
    )
    return values.get(path[1], {}).get(path[2])
