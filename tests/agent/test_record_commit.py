"""Pod records: saved at once (renamed into place), made durable by the group committer in rounds."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from agent.container.podrecord import PodRecord, RecordStore
from tests.agent.support import wait_until


def uid(i: int) -> str:
    return f"00000000-0000-0000-0000-{i:012d}"


def committer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "record-commit"]


def test_saves_from_many_workers_are_read_back_at_once_and_flushed(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)

    def worker(first: int) -> None:
        for i in range(first, first + 20):
            for phase in ("Pending", "Running"):
                store.save(PodRecord(uid(i), "default", f"p{i}", phase=phase))

    threads = [threading.Thread(target=worker, args=(n * 20,)) for n in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Visible before any flush: an agent started after a SIGKILL now reads the newest record.
    assert json.loads(store.path(uid(99)).read_text())["phase"] == "Running"
    assert store.flush(timeout=30)
    records, problems = store.load_all()
    assert not problems
    assert {r.phase for r in records.values()} == {"Running"} and len(records) == 100
    assert not [p.name for p in store.directory.iterdir() if p.name.startswith(".")]  # no temporary files


def test_the_committer_thread_ends_when_idle_and_skips_deleted_records(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    store.save(PodRecord(uid(1), "default", "gone"))
    store.delete(uid(1))  # removed before its round: nothing to fsync, no error
    store.save(PodRecord(uid(2), "default", "kept"))
    assert store.flush(timeout=30)
    assert store.path(uid(2)).exists() and not store.path(uid(1)).exists()
    wait_until(lambda: not committer_threads(), 10, "the committer thread to end once idle")
    store.save(PodRecord(uid(3), "default", "again"))  # a new round starts a new thread
    assert store.flush(timeout=30)


def test_a_failed_fsync_is_logged_and_the_round_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real_fsync = os.fsync
    calls: list[int] = []

    def failing(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(5, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing)  # the committer calls os.fsync
    store = RecordStore(tmp_path)
    store.save(PodRecord(uid(7), "default", "eio"))
    assert store.flush(timeout=30)
    assert "fsync of" in caplog.text and "Input/output error" in caplog.text
    assert json.loads(store.path(uid(7)).read_text())["name"] == "eio"
