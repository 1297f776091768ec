"""Rotation by rename and reopen (a CRI container's log, agent/logs/renaming.py), with the runtime's reopen
played by the test: it makes the new file at the path, as ReopenContainerLog does."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from agent.logs import reader
from agent.logs.manager import ContainerLogManager, LiveLog
from agent.logs.reader import RenamedFollower, log_files, read_all, snapshot, tail_lines
from agent.logs.renaming import rotate_renamed, rotated_files

NOON = 1_795_694_400.0  # 2026-11-26T12:00:00Z


class Runtime:
    """Writes lines into the log it holds open, and reopens it at the path when asked."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.file = log.open("ab")
        self.reopened = 0

    def write(self, *lines: str) -> None:
        self.file.write("".join(f"{line}\n" for line in lines).encode())
        self.file.flush()

    def reopen(self) -> None:
        self.file.close()
        self.file = self.log.open("ab")
        self.reopened += 1


def test_rotations_keep_max_files_compress_all_but_the_newest_and_lose_nothing(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    runtime = Runtime(log)
    for n in range(5):
        runtime.write(f"batch {n}")
        assert rotate_renamed(log, max_files=3, reopen=runtime.reopen, now=NOON)  # one second for all
    runtime.write("live")
    names = [p.name for p in rotated_files(log)]
    # Three files: the live one, the newest rotated (plain), one older gzipped; same-second names numbered.
    assert names == ["0.log.20261126-120000-3.gz", "0.log.20261126-120000-4"]
    assert runtime.reopened == 5
    with gzip.open(tmp_path / names[0], "rt") as f:
        assert f.read() == "batch 3\n"
    assert (tmp_path / names[1]).read_text() == "batch 4\n"
    assert log.read_text() == "live\n"
    assert log_files(log) == [tmp_path / names[0], tmp_path / names[1], log]
    # kubectl logs reads through the kept files, gzipped ones uncompressed, then the live one.
    assert read_all(log) == b"batch 3\nbatch 4\nlive\n"
    assert tail_lines(log, 2) == b"batch 4\nlive\n"
    (tmp_path / "1.log").write_text("next restart\n")  # another restart's files are not this one's
    assert read_all(log) == b"batch 3\nbatch 4\nlive\n"
    assert not list(tmp_path.glob("*.tmp"))


def test_a_failed_reopen_puts_the_log_back(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    runtime = Runtime(log)
    runtime.write("kept")

    def refuse() -> None:
        raise RuntimeError("container runtime unix:///x: rpc error: code = UNAVAILABLE")

    with pytest.raises(RuntimeError, match="UNAVAILABLE"):
        rotate_renamed(log, max_files=3, reopen=refuse, now=NOON)
    assert log.read_text() == "kept\n" and rotated_files(log) == []
    runtime.write("more")  # the runtime still writes into the file readers read
    assert log.read_text() == "kept\nmore\n"


def test_leftovers_of_a_cut_compression_are_cleaned(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    runtime = Runtime(log)
    (tmp_path / "0.log.20261126-110000.gz.tmp").write_bytes(b"half")
    (tmp_path / "0.log.20261126-110000").write_text("done\n")
    with gzip.open(tmp_path / "0.log.20261126-110000.gz", "wt") as f:
        f.write("done\n")
    runtime.write("new")
    rotate_renamed(log, max_files=5, reopen=runtime.reopen, now=NOON)
    assert [p.name for p in rotated_files(log)] == ["0.log.20261126-110000.gz", "0.log.20261126-120000"]
    assert not list(tmp_path.glob("*.tmp"))


def test_the_manager_renames_a_cri_log_and_rotates_a_process_log_in_place(tmp_path: Path) -> None:
    cri_log, process_log = tmp_path / "cri.log", tmp_path / "process.log"
    runtime = Runtime(cri_log)
    runtime.write("x" * 100)
    process_log.write_text("y" * 100 + "\n")
    manager = ContainerLogManager(
        lambda: [LiveLog(cri_log, runtime.reopen), process_log], max_size=50, max_files=3
    )
    manager.check_once()
    assert manager.rotations == 2 and runtime.reopened == 1
    assert [p.name for p in rotated_files(cri_log)] == [next(tmp_path.glob("cri.log.*")).name]
    assert (tmp_path / ".process.log.meta").exists()  # in place: the process keeps its descriptor


def test_a_follower_finishes_the_renamed_file_then_reads_the_new_one(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    runtime = Runtime(log)
    runtime.write("one", "two")
    follower = RenamedFollower(log, len("one\n"))
    assert follower.read() == b"two\n"
    log.rename(tmp_path / "0.log.20261126-120000")  # renamed; the runtime still writes the old file
    runtime.write("three")
    assert follower.read() == b"three\n"
    runtime.reopen()
    assert follower.read() == b""  # the new file is empty: the old one may still get a last write
    runtime.write("four")
    assert follower.read() == b"four\n"
    follower.close()


@pytest.mark.parametrize("tail", [None, 1])
def test_a_line_written_while_the_snapshot_reads_is_followed_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tail: int | None
) -> None:
    # The runtime writes without the log's lock: here it writes just after the snapshot read the live file
    # (`kubectl logs -f --tail=1` once lost that line: the offset was the size taken again after the read).
    log = tmp_path / "0.log"
    runtime = Runtime(log)
    runtime.write("one", "two")
    read_at = reader._read_at
    wrote: list[str] = []

    def read_then_the_runtime_writes(path: Path, offset: int, size: int | None = None) -> bytes:
        data = read_at(path, offset, size)
        if path == log and not wrote:
            runtime.write("three")
            wrote.append("three")
        return data

    monkeypatch.setattr(reader, "_read_at", read_then_the_runtime_writes)
    data, offset = snapshot(log, tail)
    assert data == (b"one\ntwo\n" if tail is None else b"two\n")
    follower = RenamedFollower(log, offset)
    assert follower.read() == b"three\n"
    follower.close()
