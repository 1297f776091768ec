"""Minimal sd_notify(3): tell systemd we are ready, what we are doing, and that we are alive.

Every call is a no-op when NOTIFY_SOCKET is unset (not started by systemd with
Type=notify), so daemons can call these unconditionally. A failed send is logged
and reported as False, like sd_notify's negative return: a daemon must not stop
serving because systemd's socket is briefly unreachable (e.g. during daemon-reexec).
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger(__name__)


def notify(*assignments: str) -> bool:
    """Send `KEY=value` lines to systemd; returns whether a message was sent."""
    configured = os.environ.get("NOTIFY_SOCKET")
    if not configured or not assignments:
        return False
    # "@name" is a socket in the abstract namespace.
    address = "\0" + configured[1:] if configured.startswith("@") else configured
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto("\n".join(assignments).encode(), address)
    except OSError as exc:
        log.warning("sd_notify to NOTIFY_SOCKET=%s failed: %s", configured, exc)
        return False
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
