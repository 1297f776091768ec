"""kubenode.dirwatch: entry events, the directory recreated, wake-up; kubenode.sdnotify messages."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from kubenode import sdnotify
from kubenode.dirwatch import DirEvent, DirWatcher, EventKind


def read_until(watcher: DirWatcher, wanted: DirEvent) -> list[DirEvent]:
    seen: list[DirEvent] = []
    for _ in range(20):
        seen += watcher.read(timeout=2)
        if wanted in seen:
            return seen
    raise AssertionError(f"{wanted} not seen; got {seen}")


def test_create_modify_delete(tmp_path: Path) -> None:
    with DirWatcher(tmp_path, modify=True) as watcher:
        (tmp_path / "a").write_text("1")
        seen = read_until(watcher, DirEvent(EventKind.MODIFIED, "a"))
        assert seen[0] == DirEvent(EventKind.CREATED, "a")
        (tmp_path / "a").unlink()
        read_until(watcher, DirEvent(EventKind.DELETED, "a"))


def test_directory_removed_and_recreated(tmp_path: Path) -> None:
    watched = tmp_path / "plugins"
    watched.mkdir()
    with DirWatcher(watched) as watcher:
        watched.rmdir()
        read_until(watcher, DirEvent(EventKind.RESET, ""))
        watched.mkdir()
        read_until(watcher, DirEvent(EventKind.RESET, ""))
        (watched / "kubelet.sock").touch()
        read_until(watcher, DirEvent(EventKind.CREATED, "kubelet.sock"))


def test_wake_returns_a_blocked_read(tmp_path: Path) -> None:
    watcher = DirWatcher(tmp_path)
    result: list[list[DirEvent]] = []
    reader = threading.Thread(target=lambda: result.append(watcher.read()))
    reader.start()
    watcher.wake()
    reader.join(timeout=5)
    assert not reader.is_alive() and result == [[]]
    watcher.close()
    watcher.wake()  # harmless after close


def test_sdnotify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert not sdnotify.ready()
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        assert sdnotify.ready("all registered")
        assert sock.recv(100) == b"READY=1\nSTATUS=all registered"
        assert sdnotify.watchdog()
        assert sock.recv(100) == b"WATCHDOG=1"
    monkeypatch.setenv("WATCHDOG_USEC", "30000000")
    assert sdnotify.watchdog_interval() == 15.0


def test_sdnotify_reports_an_unreachable_socket_instead_of_raising(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "no-such-notify-socket"
    monkeypatch.setenv("NOTIFY_SOCKET", str(missing))
    assert not sdnotify.watchdog()  # a daemon's loop keeps running
    assert str(missing) in caplog.text
