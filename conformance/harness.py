"""The kubelet side of a conformance run: a DeviceManager on the dir, recording every Register call.

`restart()` does what a kubelet restart does to the dir: the registration server stops, every socket in the
dir is removed, and a fresh manager creates kubelet.sock again. `start()` refuses a dir whose kubelet.sock
something is serving: taking it over would delete a running kubelet's sockets and cut off its plugins.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from agent.cm.devicemanager import DeviceManager, RegistrationEvent
from kubenode.deviceapi import KUBELET_SOCKET
from kubenode.deviceplugin_client import is_serving


class HarnessError(RuntimeError):
    """The kubelet double cannot take this dir (the message names the socket and why)."""


class KubeletDouble:
    def __init__(self, kubelet_dir: Path) -> None:
        self.kubelet_dir = kubelet_dir
        self._state_dir = Path(tempfile.mkdtemp(prefix="kn-conformance-state-"))
        self._events: list[tuple[float, RegistrationEvent]] = []
        self._changed = threading.Condition()
        self._manager: DeviceManager | None = None

    def start(self) -> None:
        kubelet_socket = self.kubelet_dir / KUBELET_SOCKET
        if is_serving(kubelet_socket):
            raise HarnessError(
                f"{kubelet_socket} is being served (a running kubelet?); use another --kubelet-dir"
            )
        self._manager = DeviceManager(self.kubelet_dir, self._state_dir, on_register=self._record)
        self._manager.start()

    def stop(self) -> None:
        if self._manager is not None:
            self._manager.stop()
            self._manager = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._state_dir, ignore_errors=True)

    def restart(self) -> float:
        """Stop, wipe the dir's sockets, start again; returns the (monotonic) time kubelet.sock came back."""
        self.stop()
        self.start()  # DeviceManager.start removes every socket in the dir first, as the kubelet does
        return time.monotonic()

    def _record(self, event: RegistrationEvent) -> None:
        with self._changed:
            self._events.append((time.monotonic(), event))
            self._changed.notify_all()

    def latest(self, since: float = 0.0) -> dict[str, RegistrationEvent]:
        """The newest Register call per resource name at or after `since`."""
        with self._changed:
            return {e.resource_name: e for at, e in self._events if at >= since}

    def wake(self) -> None:
        """Make waiters re-check their conditions (e.g. because the plugin process exited)."""
        with self._changed:
            self._changed.notify_all()

    def wait_for_registrations(
        self,
        resource: str | None,
        timeout: float,
        settle: float,
        since: float = 0.0,
        give_up: Callable[[], bool] = lambda: False,
    ) -> bool:
        """Wait for `resource` (or, if None, for any resource and then `settle` seconds without new ones).

        Returns False at the timeout, or as soon as `give_up()` is true (checked whenever `wake()` is called).
        """
        deadline = time.monotonic() + timeout
        with self._changed:

            def arrived() -> bool:
                names = {e.resource_name for at, e in self._events if at >= since}
                return resource in names if resource is not None else bool(names)

            remaining = max(0.0, deadline - time.monotonic())
            if not self._changed.wait_for(lambda: arrived() or give_up(), timeout=remaining) or not arrived():
                return False
            if resource is None:
                count = len(self._events)
                while self._changed.wait(timeout=settle) and len(self._events) != count:
                    count = len(self._events)
            return True
