"""Log rotation under a live writer: nothing lost, nothing split, the directory bounded, followers keep up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agent.logs.manager import ContainerLogManager
from agent.logs.reader import Follower, read_all, tail_lines
from agent.logs.rotation import live_size, read_meta, rotate

# Numbered lines of varying length, written in many small writes (as a chatty process does), never a
# whole line in one write, so a rotation between two writes would split a line if it could.
WRITER = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
for i in range(int(sys.argv[2])):
    line = b"%08d " % i + b"x" * (i % 300) + b"\\n"
    os.write(fd, line[:5]); os.write(fd, line[5:])
"""


# WRITER, with a pause after every CHUNK lines: it says "c" and waits for one byte on stdin.
PACED_WRITER = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
chunk = int(sys.argv[3])
for i in range(int(sys.argv[2])):
    line = b"%08d " % i + b"x" * (i % 300) + b"\\n"
    os.write(fd, line[:5]); os.write(fd, line[5:])
    if (i + 1) % chunk == 0:
        os.write(1, b"c"); os.read(0, 1)
"""


def expected(count: int) -> bytes:
    return b"".join(b"%08d " % i + b"x" * (i % 300) + b"\n" for i in range(count))


def start_writer(log: Path, count: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(count)])


def test_rotating_under_a_live_writer_loses_and_splits_nothing(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    log.touch()
    count = 20_000
    writer = start_writer(log, count)
    follower = Follower(log, 0)
    followed = bytearray()
    rotations = 0
    while writer.poll() is None:
        if live_size(log) > 16 * 1024 and rotate(log, max_files=10_000):
            rotations += 1
        followed += follower.read(1 << 20)
    assert writer.wait() == 0
    rotate(log, max_files=10_000)  # and once more at rest
    while chunk := follower.read(1 << 20):
        followed += chunk
    meta = read_meta(log)
    assert rotations >= 1 and meta.collapsed > 0  # rotated while written; the file's head was cut in place
    for rotated in meta.rotated:
        assert (tmp_path / rotated.name).read_bytes().endswith(b"\n")  # every rotated file holds whole lines
    assert read_all(log) == expected(count)
    assert bytes(followed) == expected(count)
    assert tail_lines(log, 3) == b"".join(expected(count).splitlines(keepends=True)[-3:])


def test_the_manager_keeps_the_directory_within_max_size_times_max_files(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    log.touch()
    manager = ContainerLogManager(lambda: [log], max_size=32 * 1024, max_files=3, interval=0.01)
    # The writer stops after each 1,000 lines until the manager has checked once: on a loaded machine a
    # free-running writer could finish before the manager's loop ran at all, and nothing would rotate.
    writer = subprocess.Popen(
        [sys.executable, "-c", PACED_WRITER, str(log), "15000", "1000"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert writer.stdin is not None and writer.stdout is not None
    while writer.stdout.read(1):  # one byte per chunk written
        manager.check_once()
        writer.stdin.write(b"g")
        writer.stdin.flush()
    writer.stdin.close()
    assert writer.wait() == 0
    manager.check_once()
    on_disk = sum(p.stat().st_blocks * 512 for p in tmp_path.iterdir())
    rotated = [p for p in tmp_path.iterdir() if p.name.startswith("0.log.")]
    assert len(rotated) <= 2 and manager.rotations > 3
    # max_size x max_files, plus what one check interval of writing adds (here: one loop of the writer).
    assert on_disk < 3 * 32 * 1024 + 4 * 1024 * 1024
    assert read_all(log).endswith(expected(15_000)[-1000:])  # the newest output is all there
