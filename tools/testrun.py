"""`make pytest`: the whole suite as two pytest runs side by side. The suite holds a core for about a fifth
of its time (5 CPU-minutes in 11.5 min on this 2-core kind); most of it waits on processes, containers,
image builds and leases. Two runs overlap those waits: 690 s in one run became ~540 s in two.

Flow: the side run takes SIDE's paths, the main run everything else (`--ignore` of each); both start at
once with the same arguments -> the main run's output is streamed as it comes, the side run's goes to a
file that is printed whole when it ends (so neither's lines are mixed) -> the exit status is the worse of
the two, and the last line totals both runs' counts ('testrun: N passed, N failed', the plain line CI
reads). The suite's session checks hold in each run (tests/conftest.py's leak check knows another live
pytest's processes and does not blame this run for them). Nothing is skipped.

Usage: python tools/testrun.py [pytest options...] (options only: the paths are the whole suite's)
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Packages that share no process, port or host path with the rest, and about half the wall time: the image
# (mmdebstrap base, podman build) and its DaemonSets, the units booted under systemd-nspawn, the CRI tests
# (every test that runs containerd is here: its CRI namespace's cgroups are shared by all its runs), the
# scheduler's live faults (lease expiries) and the agent as a cluster node (API outages, pressure, streams).
# Measured on a fresh clone: main 482 s and side 290 s before the agent's cluster tests (~120 s) moved here.
SIDE = ("tests/image", "tests/systemd", "tests/cri", "tests/scheduler_live", "tests/agent_cluster")
COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)")


def counts(output: str) -> dict[str, int]:
    """The counts of pytest's closing line ('== 3 failed, 2070 passed in 710.35s ==')."""
    closing = [line for line in output.splitlines() if line.startswith("=") and " in " in line]
    found: dict[str, int] = {}
    if closing:
        for number, word in COUNT.findall(closing[-1]):
            found["errors" if word.startswith("error") else word] = int(number)
    return found


def main(argv: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest"]
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as side_log:
        side = subprocess.Popen(
            [*pytest, *argv, *SIDE], cwd=ROOT, stdout=side_log, stderr=subprocess.STDOUT, text=True
        )
        main_run = subprocess.Popen(
            [*pytest, *argv, *(f"--ignore={path}" for path in SIDE)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert main_run.stdout is not None
        main_output: list[str] = []
        for line in main_run.stdout:
            main_output.append(line)
            sys.stdout.write(line)
            sys.stdout.flush()
        main_status = main_run.wait()
        side_status = side.wait()
        side_log.seek(0)
        side_output = side_log.read()
    print(f"\n===== the side run ({' '.join(SIDE)}), side by side with the run above =====", flush=True)
    sys.stdout.write(side_output)
    total: dict[str, int] = {}
    for found in (counts("".join(main_output)), counts(side_output)):
        for key, value in found.items():
            total[key] = total.get(key, 0) + value
    failed = total.get("failed", 0) + total.get("errors", 0)
    status = max(main_status, side_status)
    if status != 0 and failed == 0:
        failed = 1  # a run that failed without a failed test (an internal error, a leak): still a failure
    summary = f"testrun: {total.get('passed', 0)} passed, {failed} failed"
    if total.get("skipped"):
        summary += f", {total['skipped']} skipped"
    print(f"\nmain run exit {main_status}, side run exit {side_status}, {time.monotonic() - started:.0f} s")
    print(summary)
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
