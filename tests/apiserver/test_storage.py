"""The store without HTTP: revisions, replay after reopening, compaction, the watch window, and
a lagging watcher being closed instead of growing without bound."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from apiserver.selectors import Requirement, Selector
from apiserver.storage import store as store_module
from apiserver.storage.cache import Entry, Event, Filter, WatchCache, Watcher
from apiserver.storage.store import Store


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def open_store(path: Path, history: int = 100) -> Store:
    store = Store(path / "state.db", {"nodes": lambda obj: {}}, history)
    store.load()
    return store


async def write_all(store: Store, changes: list[tuple[str, str, dict[str, Any]]]) -> list[int]:
    store.start(asyncio.get_running_loop())
    futures = [store.write("nodes", "", name, obj, kind) for name, kind, obj in changes]
    entries = await asyncio.gather(*futures)
    return [entry.rev for entry in entries]


def test_revisions_increase_and_survive_reopening(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    changes = [("a", "ADDED", node("a")), ("b", "ADDED", node("b")), ("a", "MODIFIED", node("a", x="1"))]
    revs = asyncio.run(write_all(store, changes))
    store.close()
    assert revs == [1, 2, 3]
    again = open_store(tmp_path)
    assert again.revision == 3
    entry = again.get("nodes", "", "a")
    assert entry is not None and entry.rev == 3 and entry.labels == {"x": "1"}
    events = again.cache.since("nodes", 1)
    assert events is not None and [(e.type, e.entry.name) for e in events] == [
        ("ADDED", "b"),
        ("MODIFIED", "a"),
    ]
    revs = asyncio.run(write_all(again, [("b", "DELETED", node("b"))]))
    again.close()
    assert revs == [4]
    assert open_store(tmp_path).get("nodes", "", "b") is None


def test_history_window_and_compaction_keep_the_table_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "COMPACT_EVERY", 50)
    store = open_store(tmp_path, history=20)
    changes = [("hot", "ADDED", node("hot"))] + [
        ("hot", "MODIFIED", node("hot", n=str(i))) for i in range(300)
    ]
    asyncio.run(write_all(store, changes))
    assert store.cache.since("nodes", 1) is None  # fell out of the window: 410 for a watcher
    assert store.cache.since("nodes", 295) is not None
    store.close()
    rows = sqlite3.connect(tmp_path / "state.db").execute("SELECT COUNT(*) FROM log").fetchone()[0]
    assert rows <= 20 + 50 + 1
    reopened = open_store(tmp_path, history=20)
    entry = reopened.get("nodes", "", "hot")
    assert entry is not None and entry.labels == {"n": "299"} and reopened.revision == 301


def test_a_lagging_watcher_is_closed_not_grown() -> None:
    watcher = Watcher("nodes", Filter(), limit=10)
    for rev in range(1, 30):
        watcher.offer(Event("ADDED", Entry("nodes", "", f"n{rev}", rev, b"{}", {}, {}), None), 0.0)
    assert watcher.overflowed and watcher.closed and len(watcher.pending) == 10


def test_selector_transitions_become_added_and_deleted() -> None:
    async def run() -> list[bytes]:
        on_node = Selector((Requirement("spec.nodeName", "=", ("n1",)),))
        watcher = Watcher("pods", Filter("default", fields=on_node))
        unbound = Entry("pods", "default", "p", 1, b"{}", {}, {"spec.nodeName": ""})
        bound = Entry("pods", "default", "p", 2, b"{}", {}, {"spec.nodeName": "n1"})
        relabeled = Entry("pods", "default", "p", 3, b"{}", {"a": "b"}, {"spec.nodeName": "n1"})
        gone = Entry("pods", "default", "p", 4, b"{}", {}, {"spec.nodeName": ""})
        for event in (
            Event("ADDED", unbound, None),
            Event("MODIFIED", bound, unbound),
            Event("MODIFIED", relabeled, bound),
            Event("MODIFIED", gone, relabeled),
        ):
            watcher.offer(event, 0.0)
        return [line.split(b'"', 4)[3] for line, _, _ in watcher.pending]

    assert asyncio.run(run()) == [b"ADDED", b"MODIFIED", b"DELETED"]


def test_pages_of_a_list_follow_the_objects_as_names_come_and_go() -> None:
    """entries(after=...) keeps names in order between pages; adds and deletes between pages show."""
    cache = WatchCache(100)
    rng = random.Random(7)
    live: dict[tuple[str, str], Entry] = {}
    for rev in range(1, 400):
        namespace, name = rng.choice(("a", "b", "c")), f"p{rng.randrange(60):02d}"
        entry = Entry("pods", namespace, name, rev, b"{}", {"odd": str(rev % 2)}, {})
        if (namespace, name) in live and rng.random() < 0.4:
            cache.apply(Event("DELETED", entry, live.pop((namespace, name))), 0.0)
        else:
            cache.apply(Event("MODIFIED" if (namespace, name) in live else "ADDED", entry, None), 0.0)
            live[(namespace, name)] = entry
        after = (rng.choice(("", "a", "b", "c")), f"p{rng.randrange(60):02d}") if rng.random() < 0.7 else None
        namespace_filter = rng.choice(("", "b"))
        expected = [
            key
            for key in sorted(live)
            if (after is None or key > after) and (not namespace_filter or key[0] == namespace_filter)
        ]
        found = [(e.namespace, e.name) for e in cache.entries("pods", Filter(namespace_filter), after)]
        assert found == expected
        assert all(e is live[(e.namespace, e.name)] for e in cache.entries("pods", Filter()))
