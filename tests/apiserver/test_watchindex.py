"""Watchers indexed by the field their selector pins: each gets exactly the events it would get if
every event were offered to every watcher (a pod binding, moving, relabelled, deleted), indexed and
unindexed watchers side by side; and one event's line is the same bytes for every watcher."""

from __future__ import annotations

import asyncio
import random

from apiserver.selectors import Requirement, Selector
from apiserver.storage.cache import Entry, Event, Filter, WatchCache, Watcher
from apiserver.storage.watchindex import WatcherSet

NODES = ("", "n1", "n2", "n3")


def pinned(*pairs: tuple[str, str, str]) -> Selector:
    return Selector(tuple(Requirement(key, op, (value,)) for key, op, value in pairs))


def pod_entry(name: str, rev: int, node: str, namespace: str = "default", **labels: str) -> Entry:
    fields = {
        "spec.nodeName": node,
        "spec.host": node,
        "metadata.name": name,
        "metadata.namespace": namespace,
    }
    data = b'{"metadata":{"name":"%s","resourceVersion":"%d"}}' % (name.encode(), rev)
    return Entry("pods", namespace, name, rev, data, dict(labels), fields)


def watchers_of_every_kind() -> list[Watcher]:
    filters = [Filter(fields=pinned(("spec.nodeName", "=", node))) for node in NODES]
    filters += [
        Filter(),  # everything
        Filter("other"),  # another namespace only
        Filter(labels=pinned(("app", "=", "web"))),
        Filter(fields=pinned(("spec.nodeName", "!=", ""))),  # bound pods: not indexable
        Filter(fields=pinned(("spec.host", "=", "n2"))),
        Filter(fields=pinned(("metadata.name", "=", "p1"))),
        Filter("other", fields=pinned(("spec.nodeName", "=", "n1"))),
        Filter(labels=pinned(("app", "=", "web")), fields=pinned(("spec.nodeName", "=", "n3"))),
        Filter(fields=pinned(("spec.nodeName", "=", "n1"), ("status.phase", "=", "Running"))),
    ]
    return [Watcher("pods", f, limit=100_000) for f in filters]


def random_events(seed: int, count: int) -> list[Event]:
    """Pods created (bound or not), bound, moved, relabelled and deleted, in two namespaces."""
    rng = random.Random(seed)
    live: dict[tuple[str, str], Entry] = {}
    events = []
    for rev in range(1, count + 1):
        namespace, name = rng.choice(("default", "other")), f"p{rng.randrange(6)}"
        labels = {"app": rng.choice(("web", "db"))}
        prev = live.get((namespace, name))
        if prev is None:
            entry = pod_entry(name, rev, rng.choice(NODES), namespace, **labels)
            events.append(Event("ADDED", entry, None))
            live[(namespace, name)] = entry
        elif rng.random() < 0.25:
            gone = pod_entry(name, rev, prev.fields["spec.nodeName"], namespace, **prev.labels)
            events.append(Event("DELETED", gone, prev))
            del live[(namespace, name)]
        else:
            entry = pod_entry(name, rev, rng.choice(NODES), namespace, **labels)
            events.append(Event("MODIFIED", entry, prev))
            live[(namespace, name)] = entry
    return events


def delivered(watcher: Watcher) -> list[tuple[bytes, int]]:
    return [(line, rev) for line, rev, _ in watcher.pending]


def test_indexed_delivery_equals_offering_every_event_to_every_watcher() -> None:
    async def run() -> None:
        for seed in range(20):
            events = random_events(seed, 300)
            cache = WatchCache(1000)
            indexed = watchers_of_every_kind()
            everyone = watchers_of_every_kind()
            for watcher in indexed:
                cache.add_watcher(watcher)
            for event in events:
                cache.apply(event, 0.0)
                for watcher in everyone:
                    watcher.offer(event, 0.0)
            for got, want in zip(indexed, everyone, strict=True):
                assert delivered(got) == delivered(want), (seed, want.filter)
            assert sum(len(w.pending) for w in indexed) > 300  # the events did reach watchers

    asyncio.run(run())


def test_a_node_watcher_sees_its_pods_arrive_and_leave_and_nothing_else() -> None:
    async def run() -> dict[str, list[str]]:
        cache = WatchCache(100)
        watchers = {
            key: Watcher("pods", Filter(fields=pinned(("spec.nodeName", "=", node))))
            for key, node in (("n1", "n1"), ("n2", "n2"), ("unbound", ""))
        }
        watchers["web"] = Watcher("pods", Filter(labels=pinned(("app", "=", "web"))))
        for watcher in watchers.values():
            cache.add_watcher(watcher)
        unbound = pod_entry("p", 1, "", app="web")
        bound = pod_entry("p", 2, "n1", app="web")
        moved = pod_entry("p", 3, "n2", app="db")
        gone = pod_entry("p", 4, "n2", app="db")
        for event in (
            Event("ADDED", unbound, None),
            Event("MODIFIED", bound, unbound),
            Event("MODIFIED", moved, bound),
            Event("DELETED", gone, moved),
        ):
            cache.apply(event, 0.0)
        return {
            key: [line.split(b'"', 4)[3].decode() for line, _, _ in w.pending] for key, w in watchers.items()
        }

    assert asyncio.run(run()) == {
        "n1": ["ADDED", "DELETED"],
        "n2": ["ADDED", "DELETED"],
        "unbound": ["ADDED", "DELETED"],
        "web": ["ADDED", "MODIFIED", "DELETED"],
    }


def test_removed_watchers_leave_the_index_empty() -> None:
    watchers = WatcherSet()
    members = watchers_of_every_kind()
    for watcher in members:
        watchers.add(watcher)
    assert len(watchers) == len(members) and set(watchers) == set(members)
    for watcher in members:
        watchers.discard(watcher)
    assert len(watchers) == 0 and not watchers.indexed and not watchers.unindexed


def test_one_event_is_encoded_once_for_every_watcher_that_gets_it() -> None:
    async def run() -> list[bytes]:
        cache = WatchCache(10)
        watchers = [Watcher("pods", Filter(fields=pinned(("spec.nodeName", "=", "n1")))) for _ in range(3)]
        watchers.append(Watcher("pods", Filter()))
        for watcher in watchers:
            cache.add_watcher(watcher)
        cache.apply(Event("ADDED", pod_entry("p", 1, "n1"), None), 0.0)
        return [w.pending[0][0] for w in watchers]

    lines = asyncio.run(run())
    assert all(line is lines[0] for line in lines)
