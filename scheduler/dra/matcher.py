"""Selector verdicts per device, cached across scheduling cycles.

Whether a device matches a selector depends on nothing but the two, so a verdict is computed
once per (device object, expression) and kept while the device object lives (a ResourceSlice
update brings new device objects, and their old verdicts go with the old objects). A CEL runtime
error makes the device not match; the error is kept for `kubenode trace pod`.

The commonest selector of all, a class's `device.driver == "<name>"`, is answered without CEL
(the same string equality; the expression is still compiled, so a bad one fails as before).
"""

from __future__ import annotations

import re
import weakref

from kubenode.dra.cel import DeviceData, SelectorError, compile_selector
from kubenode.dra.types import Device

_DRIVER_IS = re.compile(r"""\s*device\.driver\s*==\s*(?:'([^'\\]*)'|"([^"\\]*)")\s*""")


class Matcher:
    def __init__(self) -> None:
        self._verdicts: weakref.WeakKeyDictionary[Device, dict[str, bool]] = weakref.WeakKeyDictionary()
        self._data: weakref.WeakKeyDictionary[Device, DeviceData] = weakref.WeakKeyDictionary()
        self.errors: weakref.WeakKeyDictionary[Device, dict[str, str]] = weakref.WeakKeyDictionary()

    def matches(self, driver: str, device: Device, expression: str) -> bool:
        verdicts = self._verdicts.get(device)
        if verdicts is None:
            verdicts = self._verdicts[device] = {}
        verdict = verdicts.get(expression)
        if verdict is None:
            verdict = verdicts[expression] = self._evaluate(driver, device, expression)
        return verdict

    def all_match(self, driver: str, device: Device, expressions: tuple[str, ...]) -> bool:
        return all(self.matches(driver, device, expression) for expression in expressions)

    def _evaluate(self, driver: str, device: Device, expression: str) -> bool:
        plain = _DRIVER_IS.fullmatch(expression)
        if plain is not None:
            compile_selector(expression)
            return driver == (plain[1] if plain[1] is not None else plain[2])
        data = self._data.get(device)
        if data is None:
            data = self._data[device] = DeviceData(driver, device)
        try:
            return compile_selector(expression).matches(data)
        except SelectorError as exc:
            self.errors.setdefault(device, {})[expression] = str(exc)
            return False
