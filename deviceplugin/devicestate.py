"""One resource's current devices, a change counter for ListAndWatch, and request checks.

Every request is checked here, once for all backends: an empty request, or an
unknown, unhealthy or repeated device ID, is a `RequestError` (gRPC
INVALID_ARGUMENT) whose message names the ID (cut to 128 characters).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from deviceplugin.backend import Backend, ContainerAllocation, Device
from kubenode.deviceapi import quote_id


class RequestError(ValueError):
    """A kubelet request that cannot be served as asked."""


class DeviceState:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._changed = threading.Condition()
        self._devices = backend.devices()
        self._generation = 0

    def refresh(self) -> bool:
        """Re-read the backend; wake every ListAndWatch stream if anything changed."""
        devices = self.backend.devices()
        with self._changed:
            if devices == self._devices:
                return False
            self._devices = devices
            self._generation += 1
            self._changed.notify_all()
        return True

    def snapshot(self) -> tuple[int, list[Device]]:
        with self._changed:
            return self._generation, list(self._devices)

    def wait_change(self, generation: int, done: Callable[[], bool]) -> tuple[int, list[Device]] | None:
        """Block until the devices differ from `generation`; None once `done()` (stream over)."""
        with self._changed:
            self._changed.wait_for(lambda: self._generation != generation or done())
            if done():
                return None
            return self._generation, list(self._devices)

    def wake_all(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def check_ids(self, ids: Sequence[str], what: str) -> list[Device]:
        """The devices for `ids`, which must be non-empty, known, healthy and distinct."""
        if not ids:
            raise RequestError(f"{what}: empty device list")
        with self._changed:
            known = {d.id: d for d in self._devices}
        seen: set[str] = set()
        result = []
        for device_id in ids:
            device = known.get(device_id)
            if device is None:
                raise RequestError(f"{what}: unknown device {quote_id(device_id)}")
            if not device.healthy:
                raise RequestError(f"{what}: device {quote_id(device_id)} is unhealthy")
            if device_id in seen:
                raise RequestError(f"{what}: device {quote_id(device_id)} requested twice")
            seen.add(device_id)
            result.append(device)
        return result

    def allocate(self, ids: Sequence[str]) -> ContainerAllocation:
        self.check_ids(ids, "Allocate")
        return self.backend.allocate(list(ids))

    def preferred(self, available: Sequence[str], must_include: Sequence[str], size: int) -> list[str]:
        what = "GetPreferredAllocation"
        if size <= 0:
            raise RequestError(f"{what}: allocation_size {size} must be positive")
        devices = self.check_ids(available, what)
        offered = set(available)
        for device_id in must_include:
            if device_id not in offered:
                raise RequestError(f"{what}: must-include device {quote_id(device_id)} is not available")
        if len(set(must_include)) != len(must_include):
            raise RequestError(f"{what}: must-include list repeats a device")
        return self.backend.preferred(devices, list(must_include), min(size, len(devices)))
