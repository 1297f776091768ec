"""A health file that keeps naming a device this backend does not have (two static resources sharing one
file, as in `make bench`) is warned about once, with the count when it stops, instead of on every read."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from deviceplugin.backends.static import StaticBackend
from deviceplugin.config import StaticDevice, StaticOptions


def test_an_unknown_device_in_the_health_file_is_warned_once_with_a_count(
    kubelet_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    health_file = kubelet_dir / "static-health"
    options = StaticOptions(devices=(StaticDevice(id="accel-0"),), health_file=health_file.name)
    backend = StaticBackend(options, str(kubelet_dir))
    caplog.set_level(logging.WARNING, logger="deviceplugin.backends.static")
    # Read 50 times, as the watcher does on each change the benchmark makes (no thread: exact counts).
    for flip in range(50):
        health_file.write_text("dongle-1\n" if flip % 2 else "dongle-1\naccel-0\n")
        backend._read_health_file()
    first = f"{health_file} names unknown device 'dongle-1'; ignored"
    assert [r.getMessage() for r in caplog.records] == [f"{first} (repeats are counted, not logged)"]
    health_file.write_text("accel-0\n")
    backend._read_health_file()  # the condition is over: its count is logged, once
    backend.stop()
    assert [r.getMessage() for r in caplog.records][1:] == [f"{first} (50 times in all)"]


def test_a_repeat_still_going_at_stop_is_counted_then(
    kubelet_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    health_file = kubelet_dir / "static-health"
    backend = StaticBackend(StaticOptions(devices=(), health_file=health_file.name), str(kubelet_dir))
    caplog.set_level(logging.WARNING, logger="deviceplugin.backends.static")
    health_file.write_text("x\n")
    for _ in range(3):
        backend._read_health_file()
    backend.stop()
    assert [r.getMessage().rsplit("(", 1)[1] for r in caplog.records] == [
        "repeats are counted, not logged)",
        "3 times in all)",
    ]
