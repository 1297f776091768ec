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
    # What the benchmark does to the other resource's device, 100 times: named, then not. The reads are
    # made here, as the watcher makes them on each change (no thread: exact counts).
    for flip in range(100):
        health_file.write_text("" if flip % 2 else "dongle-1\naccel-0\n")
        backend._read_health_file()
    first = f"{health_file} names unknown device 'dongle-1'; ignored"
    assert [r.getMessage() for r in caplog.records] == [f"{first} (repeats are counted, not logged)"]
    backend.stop()  # the count, once
    assert [r.getMessage() for r in caplog.records][1:] == [f"{first} (50 times in all)"]
