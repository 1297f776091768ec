"""The watchers of one resource, indexed by the field their selector pins, as kube's watch cache is.

A kubelet watches pods with `fieldSelector=spec.nodeName=<its node>`; with one watcher per node,
offering every pod event to every watcher costs O(nodes) per event. Here a watcher whose field
selector pins an indexed field with `=` is filed under that value, and an event is offered only
to the watchers filed under the value it has now or had before (a pod that moves from unbound to
bound reaches the node's watcher as ADDED; one that leaves, as DELETED), plus the unindexed
watchers. `Watcher.offer` still checks the whole filter, so the index only narrows who is asked.

Flow: `add` picks the watcher's index key once (the first of INDEXED_FIELDS its selector pins);
`candidates(event)` yields each watcher that may care about the event exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apiserver.storage.cache import Event, Filter, Watcher

# In order of preference: a node's pod watch pins spec.nodeName (spec.host is its legacy alias);
# a watch of one object (kubectl get pod x -w, an agent's own Node) pins metadata.name.
INDEXED_FIELDS = ("spec.nodeName", "spec.host", "metadata.name")


def index_key(filter_: Filter) -> tuple[str, str] | None:
    """(field, value) a watcher is filed under, or None when its selector pins no indexed field."""
    for field in INDEXED_FIELDS:
        value = filter_.fields.exact(field)
        if value is not None:
            return field, value
    return None


class WatcherSet:
    def __init__(self) -> None:
        self.unindexed: set[Watcher] = set()
        self.indexed: dict[str, dict[str, set[Watcher]]] = {}  # field -> value -> watchers
        self._keys: dict[Watcher, tuple[str, str]] = {}

    def __len__(self) -> int:
        return len(self.unindexed) + len(self._keys)

    def __iter__(self) -> Iterator[Watcher]:
        yield from self.unindexed
        yield from self._keys

    def add(self, watcher: Watcher) -> None:
        key = index_key(watcher.filter)
        if key is None:
            self.unindexed.add(watcher)
            return
        self._keys[watcher] = key
        field, value = key
        self.indexed.setdefault(field, {}).setdefault(value, set()).add(watcher)

    def discard(self, watcher: Watcher) -> None:
        key = self._keys.pop(watcher, None)
        if key is None:
            self.unindexed.discard(watcher)
            return
        field, value = key
        by_value = self.indexed[field]
        group = by_value[value]
        group.discard(watcher)
        if not group:
            del by_value[value]
            if not by_value:
                del self.indexed[field]

    def candidates(self, event: Event) -> Iterator[Watcher]:
        """Every watcher whose filter could match the event's new or previous state, once each."""
        yield from self.unindexed
        entry, prev = event.entry, event.prev
        for field, by_value in self.indexed.items():
            value = entry.fields.get(field)
            if value is not None and (group := by_value.get(value)):
                yield from group
            if prev is not None:
                before = prev.fields.get(field)
                if before is not None and before != value and (group := by_value.get(before)):
                    yield from group
