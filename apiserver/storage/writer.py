"""The SQLite writer process (`python -m apiserver.storage.writer DB`), and its pipe protocol.

Why a process: a writer *thread* shares the GIL with the event loop, and every commit hands the
GIL back and forth several times (each sqlite3 step and fsync releases and retakes it); on a busy
2-core machine each hand-off waits for the other side to be scheduled. A process commits on its
own, and the event loop only writes frames to a pipe and reads acknowledgements from another.

Frames from the server (stdin): `W` + u32 length + records (u64 rev, u8 type, u16 key length,
u32 value length, key, value) = one batch; `C` + u32 8 + u64 revision = compact. The writer takes
every frame that has arrived, commits all batches among them in ONE transaction (group commit),
and only then answers `A` + u32 number of batches committed. A failed commit answers `E` + u32
length + message and exits; end of input (the server stopped, or died) commits what arrived whole
and exits.
"""

from __future__ import annotations

import os
import select
import sqlite3
import struct
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from apiserver.storage.sqlfile import Record, commit, compact, open_db

_HEADER = struct.Struct(">cI")
_RECORD = struct.Struct(">QBHI")
_REVISION = struct.Struct(">Q")
WRITE, COMPACT, ACK, ERROR = b"W", b"C", b"A", b"E"


def encode_batch(records: Sequence[Record]) -> bytes:
    parts: list[bytes] = []
    for r in records:
        key = r.key.encode()
        parts += (_RECORD.pack(r.rev, r.type, len(key), len(r.value)), key, r.value)
    payload = b"".join(parts)
    return _HEADER.pack(WRITE, len(payload)) + payload


def encode_compact(revision: int) -> bytes:
    return _HEADER.pack(COMPACT, _REVISION.size) + _REVISION.pack(revision)


def decode_records(payload: bytes) -> list[Record]:
    records = []
    offset = 0
    while offset < len(payload):
        rev, type_, key_length, value_length = _RECORD.unpack_from(payload, offset)
        offset += _RECORD.size
        key = payload[offset : offset + key_length].decode()
        offset += key_length
        records.append(Record(rev, key, type_, payload[offset : offset + value_length]))
        offset += value_length
    return records


def frames(buffer: bytearray) -> Iterator[tuple[bytes, bytes]]:
    """Complete frames at the front of `buffer`, removed from it as they are taken."""
    while len(buffer) >= _HEADER.size:
        kind, length = _HEADER.unpack_from(buffer)
        end = _HEADER.size + length
        if len(buffer) < end:
            return
        payload = bytes(buffer[_HEADER.size : end])
        del buffer[:end]
        yield kind, payload


def _send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def serve(db: sqlite3.Connection, fd_in: int, fd_out: int) -> int:
    buffer = bytearray()
    ended = False
    while not ended:
        chunk = os.read(fd_in, 1 << 20)  # blocks until the server sends something
        ended = not chunk
        buffer += chunk
        while not ended and select.select([fd_in], [], [], 0)[0]:  # take whatever else has arrived
            more = os.read(fd_in, 1 << 20)
            ended = not more
            buffer += more
        batches = 0
        records: list[Record] = []
        compactions: list[int] = []
        for kind, payload in frames(buffer):
            if kind == WRITE:
                batches += 1
                records += decode_records(payload)
            elif kind == COMPACT:
                compactions.append(_REVISION.unpack(payload)[0])
        try:
            if records:
                commit(db, records)
            for revision in compactions:
                compact(db, revision)
        except sqlite3.Error as exc:
            message = str(exc).encode()
            _send(fd_out, _HEADER.pack(ERROR, len(message)) + message)
            return 1
        if batches:
            _send(fd_out, _HEADER.pack(ACK, batches))
    return 0


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python -m apiserver.storage.writer DB", file=sys.stderr)
        return 2
    db = open_db(Path(sys.argv[1]))
    try:
        return serve(db, sys.stdin.fileno(), sys.stdout.fileno())
    finally:
        db.close()


if __name__ == "__main__":
    sys.exit(main())
