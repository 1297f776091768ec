"""The agent's node stats from /proc text: busy CPU time from /proc/stat, bytes from /proc/meminfo; the CPU
rate from a runtime's readings (the pods' stats through a real agent: tests/agent_cluster/test_top.py,
tests/cri/test_cri_stats_logs.py)."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any, cast

from agent.container.podrecord import RUNNING, ContainerRecord, PodRecord
from agent.container.usage import CgroupReading, PodUsage, Usage
from agent.server.stats import StatsProvider, meminfo, node_cpu_ns


def test_node_cpu_counts_busy_time_only() -> None:
    hz = os.sysconf("SC_CLK_TCK")
    stat = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n"
    assert node_cpu_ns(stat) == (100 + 5 + 50 + 3 + 2 + 1) * 1_000_000_000 // hz  # not idle, not iowait


def test_meminfo_in_bytes() -> None:
    values = meminfo("MemTotal:       16384 kB\nMemAvailable:    4096 kB\nHugePages_Total:       0\n")
    assert values == {"MemTotal": 16384 * 1024, "MemAvailable": 4096 * 1024, "HugePages_Total": 0}


def test_the_rate_is_over_the_readings_own_times_and_kept_for_a_reading_served_twice() -> None:
    record = PodRecord(uid="u1", namespace="default", name="p", cgroup="kubepods/podu1", start_time="x")
    record.containers["main"] = ContainerRecord("main", state=RUNNING)
    readings = iter(
        [
            PodUsage(Usage(0, 1, 1, 10.0), {"main": Usage(0, 1, 0, 10.0)}, {"main": "c1"}),
            PodUsage(Usage(10**9, 1, 1, 12.0), {"main": Usage(10**9, 1, 0, 12.0)}, {"main": "c1"}),
            PodUsage(Usage(10**9, 1, 1, 12.0), {"main": Usage(10**9, 1, 0, 12.0)}, {"main": "c1"}),
            PodUsage(Usage(10**9, 1, 1, 14.0), {"main": Usage(0, 1, 0, 14.0)}, {"main": "c2"}),  # restarted
        ]
    )

    class Runtime:
        def pod_usage(self, record: PodRecord, cgroup: CgroupReading) -> PodUsage:
            return next(readings)

    view = SimpleNamespace(record=record)
    stats = StatsProvider(lambda: [cast(Any, view)], cast(Any, None), "node-a", lambda: cast(Any, Runtime()))

    def rates() -> tuple[int | None, int | None]:
        pod = stats.summary_json()["pods"][0]
        return pod["cpu"].get("usageNanoCores"), pod["containers"][0]["cpu"].get("usageNanoCores")

    assert rates() == (None, None)  # the first reading
    assert rates() == (5 * 10**8, 5 * 10**8)  # a second over two seconds of the runtime's clock
    assert rates() == (5 * 10**8, 5 * 10**8)  # the same sample again: the same rate, not none
    assert rates() == (0, None)  # a new container ID starts its own rate
