"""Informer: list-then-watch one resource into a local store and call handlers on every change.

Flow (client-go's reflector + store, on one thread):
1. LIST with `limit`/`continue` (a consistent read), decode every item with the consumer's
   `decode`, replace the store (a replace diffs old against new: adds, updates for a changed
   resourceVersion, deletes for what vanished) and set `has_synced` after the first one.
2. WATCH from the list's resourceVersion with `allowWatchBookmarks` and `timeoutSeconds`;
   ADDED/MODIFIED/DELETED update the store and call `on_add(obj)`, `on_update(old, new)`,
   `on_delete(obj)`; BOOKMARK only moves the resourceVersion on.
3. The watch ending normally (timeout) or the connection dropping: watch again from the last
   resourceVersion seen. 410 Gone (HTTP or an in-band ERROR event): back to 1 (relist).
   Every failure waits a capped exponential backoff with jitter before the next try; a watch
   that delivered something resets it.

Handlers run on the informer's thread, one at a time, in order; a handler that raises is
logged and does not stop the informer. `decode` turns an API object (dict) into whatever the
consumer stores; it must not raise (return an error value instead); `decode_update`, if given,
decodes a watched update from the new object and the previous version's value. The clock and
the random source are injectable.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kubenode.kubeclient.client import KubeClient, Resource, WatchStream
from kubenode.kubeclient.errors import Gone, KubeError

log = logging.getLogger(__name__)

T = TypeVar("T")

# client-go's reflector: backoff 800 ms doubling to 30 s; watches of 5-10 min.
BACKOFF_INITIAL_S = 0.8
BACKOFF_MAX_S = 30.0
WATCH_TIMEOUT_MIN_S = 300


def object_key(obj: Mapping[str, Any]) -> str:
    """namespace/name (or name for a cluster-scoped object), as client-go's MetaNamespaceKeyFunc."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def resource_version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


@dataclass
class Backoff:
    """Capped exponential backoff with full jitter: the n-th wait is in [d, 2d), d = initial*2^n <= cap."""

    initial: float = BACKOFF_INITIAL_S
    cap: float = BACKOFF_MAX_S
    rand: Callable[[], float] = random.random
    _next: float = 0.0

    def next(self) -> float:
        base = self._next or self.initial
        self._next = min(base * 2, self.cap)
        return min(base * (1 + self.rand()), self.cap)

    def reset(self) -> None:
        self._next = 0.0


@dataclass(frozen=True)
class _Entry(Generic[T]):
    version: str
    value: T


class Informer(Generic[T]):
    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        decode: Callable[[dict[str, Any]], T] = lambda obj: obj,  # type: ignore[assignment,return-value]
        decode_update: Callable[[dict[str, Any], T], T] | None = None,
        on_add: Callable[[T], None] | None = None,
        on_update: Callable[[T, T], None] | None = None,
        on_delete: Callable[[T], None] | None = None,
        page_size: int = 500,
        watch_timeout_s: int = WATCH_TIMEOUT_MIN_S,
        backoff_initial_s: float = BACKOFF_INITIAL_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
        name: str = "",
    ) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.field_selector = field_selector
        self.label_selector = label_selector
        self.decode = decode
        # A watched update decoded with the value of the object's previous version, so a consumer
        # can reuse what did not change (the scheduler: a pod's binding changes only nodeName).
        self.decode_update = decode_update
        self.on_add = on_add
        self.on_update = on_update
        self.on_delete = on_delete
        self.page_size = page_size
        self.watch_timeout_s = watch_timeout_s
        self.name = name or resource.plural
        self._clock = clock
        self._rand = rand
        self.backoff = Backoff(backoff_initial_s, backoff_max_s, rand)
        self.has_synced = threading.Event()
        self.last_resource_version = ""
        self.relists = 0  # how many LISTs (the first included): for tests and metrics
        self.watches = 0
        self._store: dict[str, _Entry[T]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stream: WatchStream | None = None
        self._thread: threading.Thread | None = None

    # ----- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def drop_watch(self) -> None:
        """End the current watch as a dropped connection would; the informer resumes (or relists)."""
        stream = self._stream
        if stream is not None:
            stream.close()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self.has_synced.wait(timeout)

    # ----- the store ---------------------------------------------------------------------------

    def get(self, key: str) -> T | None:
        with self._lock:
            entry = self._store.get(key)
            return entry.value if entry is not None else None

    def items(self) -> list[T]:
        with self._lock:
            return [e.value for e in self._store.values()]

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._store)

    # ----- the loop ----------------------------------------------------------------------------

    def _run(self) -> None:
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                if self._watch():
                    self.backoff.reset()
                    continue  # a normal end (timeoutSeconds): watch again at once
            except Gone as exc:
                log.info("%s: %s; relisting", self.name, exc)
                need_list = True
                continue  # a relist needs no backoff: the server answered
            except KubeError as exc:
                log.warning("%s: %s", self.name, exc)
            except Exception:  # a bug in a handler or decode must not end the informer
                log.exception("%s: unexpected error", self.name)
            if self._stop.wait(self.backoff.next()):
                return

    def _list(self) -> None:
        items, version = self.client.list_all(
            self.resource,
            self.namespace,
            field_selector=self.field_selector,
            label_selector=self.label_selector,
            page_size=self.page_size,
        )
        self.relists += 1
        fresh = {object_key(obj): _Entry(resource_version(obj), self.decode(obj)) for obj in items}
        with self._lock:
            old = self._store
            self._store = dict(fresh)
        for key, entry in old.items():
            if key not in fresh:
                self._call(self.on_delete, entry.value)
        for key, entry in fresh.items():
            before = old.get(key)
            if before is None:
                self._call(self.on_add, entry.value)
            elif before.version != entry.version:
                self._call(self.on_update, before.value, entry.value)
        self.last_resource_version = version
        self.has_synced.set()

    def _watch(self) -> bool:
        """One watch from the last resourceVersion; True if it ended normally or delivered events."""
        timeout = int(self.watch_timeout_s * (1 + self._rand()))
        stream = self.client.watch(
            self.resource,
            self.namespace,
            resource_version=self.last_resource_version,
            timeout_seconds=timeout,
            field_selector=self.field_selector,
            label_selector=self.label_selector,
        )
        self._stream = stream
        self.watches += 1
        if self._stop.is_set():
            stream.close()
            return True
        for event in stream:
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                code = obj.get("code")
                message = str(obj.get("message") or obj)
                if code == 410:
                    raise Gone(410, str(obj.get("reason") or "Expired"), message, obj)
                raise KubeError(f"watch error event: {message}")
            self.backoff.reset()
            version = resource_version(obj)
            if kind == "BOOKMARK":
                if version:
                    self.last_resource_version = version
                continue
            self._apply(str(kind), obj)
            if version:
                self.last_resource_version = version
        return True

    def _apply(self, kind: str, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        if kind == "DELETED":
            with self._lock:
                self._store.pop(key, None)
            self._call(self.on_delete, self.decode(obj))  # its final state, as client-go hands it over
            return
        with self._lock:
            old = self._store.get(key)  # only this thread changes the store: still current below
        if old is not None and self.decode_update is not None:
            value = self.decode_update(obj, old.value)
        else:
            value = self.decode(obj)
        new = _Entry(resource_version(obj), value)
        with self._lock:
            self._store[key] = new
        if old is None:
            self._call(self.on_add, new.value)
        else:
            self._call(self.on_update, old.value, new.value)

    def _call(self, handler: Callable[..., None] | None, *args: Any) -> None:
        if handler is None:
            return
        try:
            handler(*args)
        except Exception:
            log.exception("%s: handler failed", self.name)
