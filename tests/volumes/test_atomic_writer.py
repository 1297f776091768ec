"""The atomic writer: ..data swapped in one rename, relative links, no-op when nothing changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.volumemanager.atomicwriter import DATA_DIR, FileProjection, PayloadError, write


def test_a_payload_is_written_behind_data_and_relative_links(tmp_path: Path) -> None:
    target = tmp_path / "vol"
    assert write(target, {"a.conf": FileProjection(b"one", 0o644), "dir/b": FileProjection(b"two", 0o400)})
    first = os.readlink(target / DATA_DIR)
    assert first.startswith("..") and (target / first).is_dir()
    assert os.readlink(target / "a.conf") == "..data/a.conf"
    assert os.readlink(target / "dir") == "..data/dir"
    assert (target / "a.conf").read_bytes() == b"one"
    assert (target / "dir/b").stat().st_mode & 0o777 == 0o400

    assert not write(
        target, {"a.conf": FileProjection(b"one", 0o644), "dir/b": FileProjection(b"two", 0o400)}
    )
    assert os.readlink(target / DATA_DIR) == first

    assert write(target, {"a.conf": FileProjection(b"changed", 0o644)})
    second = os.readlink(target / DATA_DIR)
    assert second != first and not (target / first).exists()
    assert (target / "a.conf").read_bytes() == b"changed"
    assert not os.path.lexists(target / "dir")  # gone from the payload: its link goes too
    assert sorted(os.listdir(target)) == sorted([DATA_DIR, second, "a.conf"])


def test_a_mode_change_alone_is_written(tmp_path: Path) -> None:
    write(tmp_path, {"k": FileProjection(b"v", 0o644)})
    assert write(tmp_path, {"k": FileProjection(b"v", 0o600)})
    assert (tmp_path / "k").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("path", ["/abs", "../up", "a/../b", "..hidden", ""])
def test_paths_kube_refuses_are_refused(tmp_path: Path, path: str) -> None:
    with pytest.raises(PayloadError):
        write(tmp_path / "vol", {path: FileProjection(b"x", 0o644)})
    assert not (tmp_path / "vol").exists() or not os.listdir(tmp_path / "vol")
