"""Node agent figures on a real cgroup v2 kernel, measured in the virtme-ng guest UNDER QEMU TCG EMULATION.

This host is a cgroup v1 hybrid, so `tools/cgroup2_guest.py --only figures` boots Debian's kernel
under qemu without KVM and runs tests/cgroup2_guest/guest_figures.py there: agent_bench.py's own
syncPod (new pod, no process start) and 110-pods-to-all-cgroups measurements, on the v2 backend.
Emulation makes everything tens of times slower than a real v2 node; the figures are labelled so.
Needs root (the guest boots as the same user and makes cgroups).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchstats import report

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    out = Path(tempfile.mkdtemp(prefix="kn-cg2-bench-"))
    runner = [sys.executable, str(REPO / "tools/cgroup2_guest.py"), "--only", "figures", "--deadline", "1200"]
    with (out / "runner.log").open("w") as log:
        done = subprocess.run([*runner, "--out", str(out)], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    figures = out / "figures.tsv"
    if done.returncode != 0 or not figures.exists():
        print(f"cgroup2_guest_bench: the guest run failed; see {out}/runner.log", file=sys.stderr)
        return 1
    for line in figures.read_text().splitlines():
        name, value, unit = line.split("\t")
        report(name, float(value), unit)
    shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
