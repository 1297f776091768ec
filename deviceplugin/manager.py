"""Runs every configured resource and keeps it registered with the kubelet.

The main loop blocks on inotify events of the kubelet dir (no polling). After
any event it reconciles from what is on disk, so missed or reordered events do
no harm: a resource whose socket vanished is served again; a resource not yet
registered with the current kubelet.sock (new inode = restarted kubelet)
registers. Failed registrations are retried with a short, growing backoff.
"""

from __future__ import annotations

import logging
import os
import signal
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

from deviceplugin.backend import Backend
from deviceplugin.backends import make_backend
from deviceplugin.config import PluginConfig, ResourceConfig
from deviceplugin.devicestate import DeviceState
from deviceplugin.endpoint import EndpointError, ResourceEndpoint
from deviceplugin.metrics import NO_METRICS, PluginRecorder
from kubenode import sdnotify
from kubenode.deviceapi import KUBELET_SOCKET
from kubenode.dirwatch import DirWatcher

log = logging.getLogger(__name__)

FIRST_RETRY_S = 0.05
MAX_RETRY_S = 5.0
# While kubelet.sock is missing the plugin only waits; say so now and then, so a wrong dir is noticed.
WAIT_REMINDER_S = 30.0


@dataclass
class _Registration:
    kubelet_id: tuple[int, int] | None = None  # identity of the kubelet.sock we registered with
    failures: int = 0
    retry_at: float = 0.0


class Resource:
    """A configured resource with its backend, device state and endpoint."""

    def __init__(self, config: ResourceConfig, backend: Backend, kubelet_dir: str) -> None:
        self.config = config
        self.backend = backend
        self.state = DeviceState(backend)
        self.endpoint = ResourceEndpoint(config.name, config.socket, self.state, kubelet_dir)
        self.registration = _Registration()


def _wake_on_signals(watcher: DirWatcher) -> Callable[[], object]:
    """On the main thread, every signal's C handler writes to the watcher's wake-up pipe
    (`signal.set_wakeup_fd`), so a SIGTERM the kernel handed to a gRPC thread still ends the loop's wait at
    once and its Python handler (stop()) runs; the loop can wait as long as nothing is due, with no slices
    (kubenode/stopsignal.py says why a plain wait is not enough). Off the main thread (tests) no handler
    waits on this thread. Returns what puts the previous wake-up fd back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.set_wakeup_fd(watcher.wake_fd, warn_on_full_buffer=False)
    return lambda: signal.set_wakeup_fd(previous)


class PluginManager:
    def __init__(
        self, config: PluginConfig, kubelet_dir: str, *, wait_reminder_s: float = WAIT_REMINDER_S
    ) -> None:
        self.kubelet_dir = Path(kubelet_dir)
        self.wait_reminder_s = wait_reminder_s
        self._waiting_since: float | None = None  # monotonic time kubelet.sock was first seen missing
        self._next_reminder = 0.0
        self.kubelet_socket = self.kubelet_dir / KUBELET_SOCKET
        self.resources: list[Resource] = []
        try:
            for resource in config.resources:
                self.resources.append(Resource(resource, make_backend(resource, kubelet_dir), kubelet_dir))
        except BaseException:
            self._stop_backends()
            raise
        self.all_registered = threading.Event()
        self.registrations = 0  # successful Register calls, for tests and benchmarks
        self.recorder: PluginRecorder = NO_METRICS
        self._running = False
        self._stopping = threading.Event()
        self._watcher: DirWatcher | None = None

    def resource(self, name: str) -> Resource:
        return next(r for r in self.resources if r.config.name == name)

    def set_recorder(self, recorder: PluginRecorder) -> None:
        """Report registrations and allocations to `recorder` (before `run()`)."""
        self.recorder = recorder
        for resource in self.resources:
            resource.endpoint.recorder = recorder

    def loop_problem(self) -> str | None:
        """For /healthz: None while `run()` serves, else why not."""
        return None if self._running else "the device plugin loop is not running"

    def unregistered(self) -> list[str]:
        """Resources not registered with the kubelet.sock there now (for /readyz)."""
        kubelet_id = self._kubelet_id()
        return [
            r.config.name
            for r in self.resources
            if kubelet_id is None or r.registration.kubelet_id != kubelet_id
        ]

    def run(self) -> None:
        """Serve and keep registered until `stop()`; cleans up everything it made."""
        restore_wakeup: Callable[[], object] | None = None
        try:
            # Inside the try: if the dir cannot be made or watched, the backends (NVML, threads) still stop.
            self.kubelet_dir.mkdir(parents=True, exist_ok=True)
            self._watcher = DirWatcher(self.kubelet_dir)
            restore_wakeup = _wake_on_signals(self._watcher)
            for resource in self.resources:
                resource.backend.start(resource.state.refresh)
                resource.state.refresh()  # anything that changed before start
                resource.endpoint.serve()  # a problem here fails the start, naming the socket
            watchdog = sdnotify.watchdog_interval()
            self._running = True
            while not self._stopping.is_set():
                delay = self._reconcile()
                if watchdog is not None:
                    sdnotify.watchdog()
                    delay = watchdog if delay is None else min(delay, watchdog)
                self._watcher.read(delay)
        finally:
            if restore_wakeup is not None:
                restore_wakeup()
            self._running = False
            stopping = [(r.endpoint, r.endpoint.begin_stop()) for r in self.resources]
            for endpoint, done in stopping:
                endpoint.finish_stop(done)
            self._stop_backends()
            if self._watcher is not None:
                self._watcher.close()

    def stop(self) -> None:
        """Ask `run()` to return; safe from any thread or a signal handler."""
        self._stopping.set()
        if self._watcher is not None:
            self._watcher.wake()

    def close(self) -> None:
        """Release the backends of a manager that will not `run()` (run cleans up after itself)."""
        self._stop_backends()

    def _stop_backends(self) -> None:
        for resource in self.resources:
            try:
                resource.backend.stop()
            except Exception:
                log.exception("%s: backend did not stop cleanly", resource.config.name)

    def _kubelet_id(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.kubelet_socket)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_ctime_ns) if stat.S_ISSOCK(st.st_mode) else None

    def _reconcile(self) -> float | None:
        """Bring every resource to served + registered; returns seconds until a retry is due (or None)."""
        kubelet_id = self._kubelet_id()
        next_retry = self._note_waiting(kubelet_id)
        for resource in self.resources:
            if self._stopping.is_set():
                return None
            if not resource.endpoint.socket_intact():
                log.info("%s: socket gone (kubelet restart?), serving again", resource.config.name)
                resource.registration = _Registration()
                try:
                    resource.endpoint.serve()
                except (OSError, EndpointError) as exc:
                    log.warning("%s: cannot serve yet (%s); retrying", resource.config.name, exc)
                    next_retry = FIRST_RETRY_S
                    continue
            delay = self._register(resource, kubelet_id)
            if delay is not None:
                next_retry = delay if next_retry is None else min(next_retry, delay)
        self._report(kubelet_id)
        return next_retry

    def _note_waiting(self, kubelet_id: tuple[int, int] | None) -> float | None:
        """Log when kubelet.sock goes missing, then a reminder every wait_reminder_s (at INFO: waiting
        for a kubelet is normal at boot); returns the seconds until the next reminder is due."""
        if kubelet_id is not None:
            self._waiting_since = None
            return None
        now = time.monotonic()
        if self._waiting_since is None:
            self._waiting_since = now
            self._next_reminder = now + self.wait_reminder_s
            log.info("waiting for %s in %s", KUBELET_SOCKET, self.kubelet_dir)
        elif now >= self._next_reminder:
            self._next_reminder = now + self.wait_reminder_s
            log.info(
                "still waiting for %s in %s (%.0f s so far)",
                KUBELET_SOCKET,
                self.kubelet_dir,
                now - self._waiting_since,
            )
        return self._next_reminder - now

    def _register(self, resource: Resource, kubelet_id: tuple[int, int] | None) -> float | None:
        reg = resource.registration
        if kubelet_id is None or reg.kubelet_id == kubelet_id:
            return None
        now = time.monotonic()
        if reg.failures and now < reg.retry_at:
            return reg.retry_at - now
        try:
            resource.endpoint.register(self.kubelet_socket)
        except grpc.RpcError as exc:
            self.recorder.registration(resource.config.name, ok=False)
            reg.failures += 1
            backoff = min(MAX_RETRY_S, FIRST_RETRY_S * 2.0 ** (reg.failures - 1))
            reg.retry_at = now + backoff
            level = logging.WARNING if reg.failures >= 5 else logging.DEBUG
            log.log(
                level,
                "%s: register failed (%s); retry in %.2f s",
                resource.config.name,
                _rpc_text(exc),
                backoff,
            )
            return backoff
        # The kubelet that answered is the one whose socket is there now, not necessarily the one stat'ed
        # before the call: a kubelet restarting meanwhile (it removes every socket, then listens on a new
        # kubelet.sock) answers on the new socket. Recording the old identity made the next reconcile register
        # again, which kubelet 1.37 refuses while the first registration's stream is up ("device plugin
        # already connected"), retried every 5 s for ever. A registration that reached the old kubelet is
        # not lost: its restart removes our socket, which resets the registration.
        resource.registration = _Registration(kubelet_id=self._kubelet_id() or kubelet_id)
        self.registrations += 1
        self.recorder.registration(resource.config.name, ok=True)
        return None

    def _report(self, kubelet_id: tuple[int, int] | None) -> None:
        registered = [
            r for r in self.resources if kubelet_id is not None and r.registration.kubelet_id == kubelet_id
        ]
        if len(registered) == len(self.resources):
            if not self.all_registered.is_set():
                self.all_registered.set()
                sdnotify.ready(f"serving {len(self.resources)} resource(s), all registered")
        elif self.all_registered.is_set():
            self.all_registered.clear()
            sdnotify.status(f"registered {len(registered)}/{len(self.resources)}; waiting for the kubelet")


def _rpc_text(exc: grpc.RpcError) -> str:
    details = getattr(exc, "details", None)
    return str(details()) if callable(details) else str(exc)
