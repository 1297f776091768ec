"""Agent figures on the cgroup v2 guest, UNDER QEMU TCG EMULATION (no KVM): far slower than a real
v2 host, so read them as relative to the same run's other figures, not as the node's speed.

The measurements are benchmarks/agent_bench.py's own (syncPod for a new pod without process
start; 110 pods from agent start to every pod cgroup in place), run here on the v2 backend.
`benchmarks/cgroup2_guest_bench.py` boots the guest for just this module and prints them.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubenode.cgroupsweep import sweep_v2_root
from tests.cgroup2_guest.conftest import Transcript
from tests.cgroup2_guest.support import REPO

SYNC_SAMPLES = 40  # the host bench takes 200; emulation makes each one ~100-500x slower
COLD_DEADLINE_S = 600
LABEL = "(cgroup v2, under qemu TCG emulation)"


@pytest.fixture
def agent_bench() -> Iterator[types.ModuleType]:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import agent_bench as bench
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    bench.SYNC_SAMPLES = SYNC_SAMPLES
    bench.COLD_DEADLINE_S = COLD_DEADLINE_S
    yield bench


@pytest.fixture
def work() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kn-guest-bench-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def leftover_bench_roots() -> list[str]:
    return [str(p) for p in Path("/sys/fs/cgroup").glob("kn-bench-*")]


def test_figures(agent_bench: types.ModuleType, work: Path, transcript: Transcript) -> None:
    try:
        samples, _cpu_per_sync = agent_bench.bench_sync_pod(work)
        transcript.figure(
            f"agent syncPod new pod p50 {LABEL}", agent_bench.percentile(samples, 50) * 1000, "ms"
        )
        transcript.figure(
            f"agent syncPod new pod p99 {LABEL}", agent_bench.percentile(samples, 99) * 1000, "ms"
        )
        cold = agent_bench.bench_cold(work, run=False)
        transcript.figure(f"agent 110 pods cold -> all pod cgroups {LABEL}", cold, "s")
    finally:
        left = leftover_bench_roots()
        for root in left:
            sweep_v2_root("/" + Path(root).name)
    assert not left, f"the benchmark left cgroup roots behind: {left}"
