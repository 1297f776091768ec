"""The agent's node stats from /proc text: busy CPU time from /proc/stat, bytes from /proc/meminfo (the pods'
stats through a real agent: tests/agent_cluster/test_top.py)."""

from __future__ import annotations

import os

from agent.server.stats import meminfo, node_cpu_ns


def test_node_cpu_counts_busy_time_only() -> None:
    hz = os.sysconf("SC_CLK_TCK")
    stat = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
    assert node_cpu_ns(stat) == (100 + 5 + 50 + 3 + 2 + 1) * 1_000_000_000 // hz  # not idle, not iowait


def test_meminfo_in_bytes() -> None:
    values = meminfo("MemTotal:       16384 kB\nMemAvailable:    4096 kB\nHugePages_Total:       0\n")
    assert values == {"MemTotal": 16384 * 1024, "MemAvailable": 4096 * 1024, "HugePages_Total": 0}
