"""What every workload controller shares: shared informers, a work queue, and the worker loop.

Flow, as client-go's shared informer factory and workqueue:
1. `SharedInformers` keeps one Informer per resource; every controller that watches a resource
   registers handlers on it (`on(resource, add=..., update=..., delete=...)`), so pods are listed and
   watched once however many controllers own them.
2. A `Controller` turns events into keys on its `WorkQueue` (deduplicated: a key waiting is not queued
   twice; a key being worked on that changes again is worked on again after, never twice at once).
3. Workers start only after every informer has synced (kube's WaitForCacheSync): a controller
   restarted in the middle of a scale first sees every pod that already exists, so it never makes
   more. A worker calls `sync(key)`; a KubeError requeues the key after a capped backoff.
4. Writes happen only while `may_act()` holds (the leader election's answer).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kubenode.kubeclient import KubeClient, KubeError
from kubenode.kubeclient.client import Resource
from kubenode.kubeclient.events import EventRecorder, reference_to
from kubenode.kubeclient.informer import Backoff, Informer

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Handler = Callable[..., None]


class SharedInformers:
    """One informer per resource, with any number of handlers for each event."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.informers: dict[str, Informer[Obj]] = {}
        self._handlers: dict[str, dict[str, list[Handler]]] = {}

    def informer(self, resource: Resource) -> Informer[Obj]:
        key = f"{resource.group}/{resource.plural}"
        if key not in self.informers:
            handlers: dict[str, list[Handler]] = {"add": [], "update": [], "delete": []}
            self._handlers[key] = handlers

            def fan(kind: str) -> Handler:
                def call(*args: Any) -> None:
                    for handler in handlers[kind]:
                        handler(*args)

                return call

            self.informers[key] = Informer(
                self.client, resource, on_add=fan("add"), on_update=fan("update"), on_delete=fan("delete"),
                name=f"controller-{resource.plural}",
            )  # fmt: skip
        return self.informers[key]

    def on(
        self,
        resource: Resource,
        *,
        add: Handler | None = None,
        update: Handler | None = None,
        delete: Handler | None = None,
    ) -> Informer[Obj]:
        informer = self.informer(resource)
        handlers = self._handlers[f"{resource.group}/{resource.plural}"]
        for kind, handler in (("add", add), ("update", update), ("delete", delete)):
            if handler is not None:
                handlers[kind].append(handler)
        return informer

    def start(self) -> None:
        for informer in self.informers.values():
            informer.start()

    def wait_for_sync(self, stop: threading.Event) -> bool:
        for informer in self.informers.values():
            while not informer.wait_for_sync(0.5):
                if stop.is_set():
                    return False
        return True

    def stop(self) -> None:
        for informer in self.informers.values():
            informer.stop()


class WorkQueue:
    """Keys to sync: deduplicated while waiting, never handed to two workers at once, delayable."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._queue: list[str] = []
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._later: dict[str, float] = {}
        self._cond = threading.Condition()
        self.shut = False

    def add(self, key: str) -> None:
        with self._cond:
            if key in self._dirty or self.shut:
                return
            self._dirty.add(key)
            if key not in self._processing:
                self._queue.append(key)
                self._cond.notify()

    def add_after(self, key: str, delay: float) -> None:
        with self._cond:
            due = self._clock() + delay
            self._later[key] = min(due, self._later.get(key, due))
            self._cond.notify()

    def _promote(self) -> float:
        """Move due delayed keys to the queue; seconds until the next one is due (1.0 if none)."""
        now = self._clock()
        wait = 1.0
        for key, due in list(self._later.items()):
            if due <= now:
                del self._later[key]
                if key not in self._dirty:
                    self._dirty.add(key)
                    if key not in self._processing:
                        self._queue.append(key)
            else:
                wait = min(wait, due - now)
        return wait

    def get(self) -> str | None:
        with self._cond:
            while not self.shut:
                wait = self._promote()
                if self._queue:
                    key = self._queue.pop(0)
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                self._cond.wait(wait)
            return None

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self.shut = True
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)


class Controller:
    """A queue of keys and the workers that sync them; subclasses implement `sync(key)`."""

    name = "controller"
    workers = 2

    def __init__(
        self, client: KubeClient, may_act: Callable[[], bool], clock: Callable[[], float] = time.time
    ) -> None:
        self.client = client
        self.may_act = may_act
        self.clock = clock  # wall time: conditions, minReadySeconds, deadlines
        # Events as kube's controllers write them, from `<name>-controller` (never blocks a sync).
        self.recorder = EventRecorder(client, f"{self.name}-controller")
        self.queue = WorkQueue()
        self._threads: list[threading.Thread] = []
        self._backoffs: dict[str, Backoff] = {}
        self._lock = threading.Lock()

    def sync(self, key: str) -> None:
        raise NotImplementedError

    def enqueue_key(self, key: str) -> None:
        self.queue.add(key)

    def event(self, obj: Obj, reason: str, message: str, kind: str = "Normal") -> None:
        self.recorder.event(reference_to(obj), kind, reason, message)

    def _work(self) -> None:
        while (key := self.queue.get()) is not None:
            try:
                if self.may_act():
                    self.sync(key)
                with self._lock:
                    self._backoffs.pop(key, None)
            except KubeError as exc:
                self._retry(key, f"{exc}")
            except Exception:  # a bug must not end the controller
                log.exception("%s: syncing %s", self.name, key)
                self._retry(key, "unexpected error")
            finally:
                self.queue.done(key)

    def _retry(self, key: str, why: str) -> None:
        with self._lock:
            backoff = self._backoffs.setdefault(key, Backoff(0.05, 10.0))
            delay = backoff.next()
        log.info("%s: %s: %s; retrying in %.2fs", self.name, key, why, delay)
        self.queue.add_after(key, delay)

    def start(self) -> None:
        self.recorder.start()
        for i in range(self.workers):
            thread = threading.Thread(target=self._work, name=f"{self.name}-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self.queue.shutdown()
        for thread in self._threads:
            thread.join(10)
        self.recorder.stop()


def meta(obj: Obj) -> dict[str, Any]:
    result: dict[str, Any] = obj.get("metadata") or {}
    return result


def is_active_namespace(namespace: Obj | None) -> bool:
    """A Namespace that exists and is not being deleted: what a controller that fills namespaces acts on."""
    if namespace is None or meta(namespace).get("deletionTimestamp"):
        return False
    return bool((namespace.get("status") or {}).get("phase", "Active") == "Active")


def key_of(obj: Obj) -> str:
    m = meta(obj)
    return f"{m.get('namespace')}/{m.get('name')}" if m.get("namespace") else str(m.get("name"))


def split_key(key: str) -> tuple[str, str]:
    namespace, _, name = key.rpartition("/")
    return namespace, name
