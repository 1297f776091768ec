"""The daemon's main loop: it hands freed heap back to the system (agent/util/memory.py) and still pings
systemd's watchdog on its own cadence, then says STOPPING on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_release_free_memory_returns_freed_heap_pages() -> None:
    code = (
        "from agent.util import memory\n"
        "def rss(): return int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])\n"
        "junk = [bytes(2000) for _ in range(40000)]\n"  # malloc'd (over 512 bytes), 80 MB
        "keep = junk[::16]\n"  # one in 16 kept: glibc cannot shrink the heap's top past them
        "del junk\n"
        "before = rss(); memory.release_free_memory(); print(before - rss())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 40_000, result.stdout  # KiB handed back


def test_the_daemon_pings_the_watchdog_and_says_stopping(cgroup_root: str, short_dir: Path) -> None:
    (short_dir / "manifests").mkdir()
    argv = [sys.executable, "-m", "cli.main", "agent", "--manifests", str(short_dir / "manifests")]
    argv += ["--state-dir", str(short_dir / "state"), "--cgroup-root", cgroup_root]
    argv += ["--device-plugin-dir", "none", "--listen", ""]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(str(short_dir / "notify"))
        notify.settimeout(20)
        env = {**os.environ, "NOTIFY_SOCKET": str(short_dir / "notify"), "WATCHDOG_USEC": "2000000"}
        env.pop("WATCHDOG_PID", None)
        agent = subprocess.Popen(argv, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
        try:
            assert notify.recv(200).startswith(b"READY=1")
            pings = []
            for _ in range(2):
                assert notify.recv(200) == b"WATCHDOG=1"
                pings.append(time.monotonic())
            assert 0.5 < pings[1] - pings[0] < 3.0  # every second (half of WatchdogSec), give or take load
            agent.send_signal(signal.SIGTERM)
            while (message := notify.recv(200)) == b"WATCHDOG=1":
                pass
            assert message == b"STOPPING=1"
            assert agent.wait(30) == 0
        finally:
            if agent.poll() is None:
                agent.kill()
            _, err = agent.communicate(timeout=30)
    assert "Traceback" not in err, err
