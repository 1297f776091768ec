"""The SQLite file: schema, opening, one transaction of rows, compaction, reading back.

The table is an MVCC log as kine keeps one: row `rev` is the object's resourceVersion, `type`
says whether the row created, modified or deleted `key`, and `value` is the object's JSON.
Compaction deletes rows that a newer row of the same key supersedes at or below the compaction
revision, and tombstones at or below it (never the newest row, which carries the revision across
a restart), so the table holds the live objects plus the recent history.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ADDED, MODIFIED, DELETED = 0, 1, 2
ROWS_PER_INSERT = 500  # 4 parameters a row, well under SQLite's 32766 host parameters per statement

_SCHEMA = """
CREATE TABLE IF NOT EXISTS log (
    rev INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    type INTEGER NOT NULL,
    value BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS log_key_rev ON log (key, rev);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


@dataclass(slots=True)
class Record:
    rev: int
    key: str
    type: int
    value: bytes


def open_db(path: Path) -> sqlite3.Connection:
    """WAL with synchronous=FULL: a COMMIT returns once the WAL is fsynced."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript(_SCHEMA)
    return db


def compacted_revision(db: sqlite3.Connection) -> int:
    row = db.execute("SELECT value FROM meta WHERE name = 'compacted'").fetchone()
    return int(row[0]) if row else 0


def rows(db: sqlite3.Connection) -> Iterator[Record]:
    """Every stored row in revision order."""
    for rev, key, type_, value in db.execute("SELECT rev, key, type, value FROM log ORDER BY rev"):
        yield Record(rev, key, type_, value)


@functools.lru_cache(maxsize=ROWS_PER_INSERT)
def _insert_statement(count: int) -> str:
    return "INSERT INTO log (rev, key, type, value) VALUES " + ",".join(["(?, ?, ?, ?)"] * count)


def commit(db: sqlite3.Connection, records: Sequence[Record]) -> None:
    """One transaction; raises sqlite3.Error (after rolling back) when it cannot be committed."""
    try:
        db.execute("BEGIN IMMEDIATE")
        for start in range(0, len(records), ROWS_PER_INSERT):
            part = records[start : start + ROWS_PER_INSERT]
            params = [value for r in part for value in (r.rev, r.key, r.type, r.value)]
            db.execute(_insert_statement(len(part)), params)
        db.execute("COMMIT")
    except sqlite3.Error:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def compact(db: sqlite3.Connection, revision: int) -> None:
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "DELETE FROM log WHERE rev <= ?1 AND EXISTS (SELECT 1 FROM log AS newer "
            "WHERE newer.key = log.key AND newer.rev > log.rev AND newer.rev <= ?1)",
            (revision,),
        )
        db.execute(
            "DELETE FROM log WHERE rev <= ?1 AND type = ?2 AND rev < (SELECT MAX(rev) FROM log)",
            (revision, DELETED),
        )
        db.execute(
            "INSERT INTO meta (name, value) VALUES ('compacted', ?1) "
            "ON CONFLICT (name) DO UPDATE SET value = MAX(value, ?1)",
            (revision,),
        )
        db.execute("COMMIT")
    except sqlite3.Error:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
