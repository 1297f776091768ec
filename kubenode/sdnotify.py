"""Minimal sd_notify(3): tell systemd we are ready, what we are doing, and that we are alive.

Every call is a no-op when NOTIFY_SOCKET is unset (not started by systemd with
Type=notify), so daemons can call these unconditionally.
"""

from __future__ import annotations

import os
import socket


def notify(*assignments: str) -> bool:
    """Send `KEY=value` lines to systemd; returns whether a message was sent."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address or not assignments:
        return False
    if address.startswith("@"):  # abstract namespace socket
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        sock.sendto("\n".join(assignments).encode(), address)
    return True


def ready(status: str | None = None) -> bool:
    return notify("READY=1", *([f"STATUS={status}"] if status else []))


def status(text: str) -> bool:
    return notify(f"STATUS={text}")


def watchdog() -> bool:
    return notify("WATCHDOG=1")


def watchdog_interval() -> float | None:
    """Seconds between WATCHDOG=1 pings (half of WatchdogSec), or None when not requested for us."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        return int(usec) / 2_000_000
    except ValueError:
        return None
