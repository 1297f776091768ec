"""Run the agent's cgroup v2 tests, or its benchmarks, on a real cgroup v2 kernel: `make test-cgroup2`.

The hosts here are cgroup v1 hybrids, so this boots Debian's kernel under virtme-ng (qemu, TCG: no KVM.
/dev/kvm opens, but the CPU shows no vmx/svm flag, this host being a VM itself; with `-cpu host` qemu
asserts on MSR 0x10a, and with `-cpu host,-arch-capabilities` or `-cpu EPYC` the guest hangs after
"Probing EDD", tried 2026-11-28) with the host's filesystem as the guest's read-only
root, and runs pytest inside it on tests/cgroup2_guest/guest_*.py (modules the host's pytest
does not collect). Flow:

1. Prerequisites: a kernel in /boot, qemu-system-x86_64, and virtme-ng's `vng` in this venv.
   Missing apt packages (linux-image-amd64, qemu-system-x86, busybox-static) are installed when we are root;
   otherwise, and for a missing vng, it fails naming what is missing. Never a skip.
2. One guest boot (~30 s under load) runs every selected module in ONE pytest process (by default
   all of them), or with `--bench 'benchmarks/SCRIPT.py ARGS'` (repeatable) those benchmark scripts one
   after the other instead (benchmarks/cgroup2_guest_bench.py, `make bench-cgroup2`), with `--v1-hybrid`
   on the guest's cgroups remounted as this host's v1 hybrid layout (the same kernel and emulation, so
   a v2 figure can be read against its v1 twin rather than against the host's); the guest writes
   its transcript (summary.txt or figures.jsonl, and rc) to a temp dir shared read-write.
3. The guest's console streams here as it runs; a deadline kills qemu's whole process group,
   so no qemu outlives this script, whatever happens.
4. Prints the summary (or the figures) and the run time; exits with the guest's status (1 if none came back).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parents[1]
GUEST_DIR = "tests/cgroup2_guest"
MODULES = {
    "rules": "guest_kernel_rules.py",
    "agent": "guest_agent_e2e.py",
    "cdi": "guest_cdi_hook.py",  # the CDI cpuset hook (deviceplugin/cdihook.py) on real cgroup v2
    "devices": "guest_device_programs.py",  # device programs (agent/cm/devicecgroup/bpf.py)
    "isolation": "guest_container_isolation.py",  # process pods: container cgroups, device programs, /dev
}
# --v1-hybrid: the v1 hierarchies this host mounts (the agent's v1 backend uses cpu, cpuacct, cpuset,
# memory, pids; devices for container device rules; freezer and blkio as the host has them).
V1_HYBRID_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids")
# virtme-ng builds the guest's initramfs from the host's busybox: without one it stops at once ("initramfs
# is needed, and no busybox was found"), as on a fresh machine where nothing else installed it yet.
APT_PACKAGES = {"kernel": "linux-image-amd64", "qemu": "qemu-system-x86", "busybox": "busybox-static"}
# The checkout's packages, compiled before a boot (compile_checkout); pip compiled the venv's.
PACKAGES = (
    "agent",
    "kubenode",
    "deviceplugin",
    "conformance",
    "cli",
    "harness",
    "tests",
    "benchmarks",
    "tools",
    "scheduler",
    "apiserver",
    "controllers",
)
OUT_ENV = "KUBENODE_CGROUP2_GUEST_OUT"  # read by tests/cgroup2_guest/conftest.py
FIGURES_ENV = "KUBENODE_BENCH_FIGURES"  # where benchmarks/benchstats.py's report() appends each figure
FIGURES = "figures.jsonl"
GUEST_SCRIPT = "guest.sh"  # in the shared out dir: what the guest runs
PYTHON_ENV = "GRPC_ENABLE_FORK_SUPPORT=false PYTHONDONTWRITEBYTECODE=1"  # every Python the guest runs
GUEST_TEST_TIMEOUT_S = 700  # per test inside the guest (the end-to-end test is long under emulation)
# make test's run (every module) takes 3-4 minutes on this 2-core machine when others load it; the
# deadline only stops a hung guest.
DEFAULT_DEADLINE_S = 900
BUDGET_S = 300


def fail(message: str) -> NoReturn:
    print(f"test-cgroup2: {message}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def newest_kernel() -> Path | None:
    kernels = sorted(Path("/boot").glob("vmlinuz-*"), key=lambda p: p.stat().st_mtime)
    return kernels[-1] if kernels else None


def missing_packages() -> list[str]:
    missing = []
    if newest_kernel() is None:
        missing.append(APT_PACKAGES["kernel"])
    if shutil.which("qemu-system-x86_64") is None:
        missing.append(APT_PACKAGES["qemu"])
    if shutil.which("busybox") is None:
        missing.append(APT_PACKAGES["busybox"])
    return missing


def ensure_prerequisites() -> tuple[Path, Path]:
    """The kernel and vng to use; installs missing apt packages as root, else fails naming them."""
    missing = missing_packages()
    if missing:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            fail(f"missing {', '.join(missing)}: apt-get install {' '.join(missing)} (as root)")
        print(f"test-cgroup2: installing {', '.join(missing)} with apt-get", flush=True)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for argv in (
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
        ):
            if subprocess.run(argv, env=env).returncode != 0:
                fail(f"`{' '.join(argv)}` failed; still missing {', '.join(missing)}")
        if missing_packages():
            fail(f"still missing after apt-get: {', '.join(missing_packages())}")
    kernel = newest_kernel()
    assert kernel is not None
    if not os.access(kernel, os.R_OK):
        fail(f"cannot read {kernel} (Debian installs it mode 0600: run as root)")
    bin_dir = Path(sys.executable).parent
    vng = bin_dir / "vng"
    if not vng.exists() or not (bin_dir / "virtme-run").exists():
        fail(f"virtme-ng is not installed in {bin_dir.parent}: pip install -e '.[dev]' (it is a dev extra)")
    if os.geteuid() != 0:
        fail("the guest tests run as the same user inside the guest and need root there: run as root")
    return kernel, vng


def compile_checkout() -> None:
    """Byte-compile the checkout's packages here, before the boot: the guest's root is this filesystem
    read-only and its Python runs under emulation, so a module with no .pyc (a fresh clone has none) would
    be compiled there at every import (collecting one module took 15 s without, 2-3 s with)."""
    packages = [str(REPO / name) for name in PACKAGES if (REPO / name).is_dir()]
    done = subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j0", *packages], capture_output=True, text=True
    )
    if done.returncode != 0:
        fail(f"compileall failed: {(done.stdout + done.stderr).strip()[-2000:]}")


def guest_command(out: Path, modules: list[str], select: str = "") -> str:
    """What the guest runs: pytest on the selected modules, its status written where the host reads it."""
    paths = [f"{GUEST_DIR}/{MODULES[name]}" for name in modules]
    pytest = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:logging", "-s", "-v"]
    pytest += ["--timeout", str(GUEST_TEST_TIMEOUT_S), *paths, *(["-k", select] if select else [])]
    env = f"{OUT_ENV}={shlex.quote(str(out))} {PYTHON_ENV}"
    rc_file = shlex.quote(str(out / "rc"))
    return f"cd {shlex.quote(str(REPO))} && {env} {shlex.join(pytest)}; echo $? > {rc_file}"


def v1_hybrid_remount() -> str:
    """Shell steps that turn the guest's cgroups into this host's layout, a v1 hybrid: a tmpfs at the mount,
    one v1 hierarchy per controller, the cgroup2 tree at unified/ with no controller. The fresh guest has
    enabled no controller on its v2 root, so each one is free to be bound to a v1 hierarchy."""
    mount = "/sys/fs/cgroup"
    steps = [f"umount {mount}", f"mount -t tmpfs -o mode=755 tmpfs {mount}"]
    for controller in V1_HYBRID_CONTROLLERS:
        hierarchy = f"{mount}/{controller}"
        steps.append(f"mkdir {hierarchy} && mount -t cgroup -o {controller} cgroup {hierarchy}")
    steps.append(f"mkdir {mount}/unified && mount -t cgroup2 cgroup2 {mount}/unified")
    return " && ".join(steps)


def bench_command(out: Path, benches: list[str], *, v1_hybrid: bool = False) -> str:
    """What the guest runs in bench mode: each script in turn, its figures appended to out/figures.jsonl;
    the status is the first failing script's (the others still run). `v1_hybrid`: on cgroup v1 (the
    host's layout) instead of v2, so a v2 figure has its v1 twin under the same emulation."""
    env = f"{FIGURES_ENV}={shlex.quote(str(out / FIGURES))} {PYTHON_ENV}"
    steps = []
    if v1_hybrid:
        rc_file = shlex.quote(str(out / "rc"))
        failed = f"echo 'guest: the cgroup v1 remount failed'; echo 1 > {rc_file}; exit 1"
        steps.append(f"{{ {v1_hybrid_remount()}; }} || {{ {failed}; }}")
    for bench in benches:
        script, *args = shlex.split(bench)
        run = shlex.join([sys.executable, script, *args])
        banner = shlex.quote(f"=== guest bench: {script}")
        steps.append(f'echo {banner}; {env} {run} || {{ s=$?; [ "$rc" = 0 ] && rc=$s; }}')
    rc_file = shlex.quote(str(out / "rc"))
    return f"cd {shlex.quote(str(REPO))} && rc=0; {'; '.join(steps)}; echo $rc > {rc_file}"


def run_guest(
    kernel: Path, vng: Path, out: Path, command: str, deadline_s: float, shared: tuple[Path, ...] = ()
) -> int | None:
    """Boot the guest running `command` and stream its console; returns the status the guest wrote to
    out/rc (None: none came back)."""
    argv = [str(vng), "--disable-kvm", "--run", str(kernel), "--memory", "2G", "--cpus", "2"]
    argv += ["--rwdir", str(out)]
    for directory in shared:  # what the guest's root does not show (a tmpfs covers /tmp and /var/tmp there)
        argv += ["--rodir", str(directory)]
    # The command goes in a file the guest reads, not on the line: virtme-ng hands --exec to the guest in
    # base64 on the kernel's command line, whose 2048 bytes a long command (the v1 remount, several
    # benchmarks) overflows, and the guest then hangs at boot without a word.
    script = out / GUEST_SCRIPT
    script.write_text(f"{command}\n")
    argv += ["--exec", f"sh {shlex.quote(str(script))}"]
    env = dict(os.environ, PATH=f"{vng.parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}")
    console = (out / "console.log").open("w", encoding="utf-8", errors="replace")
    proc = subprocess.Popen(
        argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    timed_out = threading.Event()

    def kill_group() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # vng, virtme-run and qemu: the whole session

    def on_deadline() -> None:
        timed_out.set()
        kill_group()

    started = time.monotonic()
    timer = threading.Timer(deadline_s, on_deadline)
    timer.start()
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace")
            sys.stdout.write(line)
            sys.stdout.flush()
            console.write(f"[{time.monotonic() - started:6.1f}s] {line}")
        proc.wait()
    finally:
        timer.cancel()
        kill_group()  # nothing of the guest outlives us, on success, failure or interrupt
        proc.wait()
        console.close()
    if timed_out.is_set():
        fail(f"the guest ran past {deadline_s:.0f} s and was killed (console: {out}/console.log)")
    rc_file = out / "rc"
    if not rc_file.exists():
        return None
    return int(rc_file.read_text().strip() or "1")


def transcript(out: Path, *, bench: bool) -> str:
    """The guest tests' summary, or in bench mode one line per figure the scripts recorded."""
    if bench:
        path = out / FIGURES
        if not path.exists():
            return "(the guest recorded no figure)"
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return "\n".join(f"figure: {row['name']}: {row['value']:.3f} {row['unit']}" for row in rows)
    summary = out / "summary.txt"
    return summary.read_text().rstrip() if summary.exists() else "(the guest wrote no summary)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = ",".join(MODULES)
    parser.add_argument(
        "--only", default=default, help=f"comma list of {', '.join(MODULES)} (default {default})"
    )
    parser.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE_S, help="kill the guest after S s")
    parser.add_argument("-k", dest="select", default="", help="pytest -k expression inside the guest")
    parser.add_argument("--out", type=Path, help="keep the guest's transcript in this dir (default: temp)")
    parser.add_argument(
        "--share", type=Path, action="append", default=[], help="a host dir the guest reads (repeatable)"
    )
    parser.add_argument(
        "--bench",
        action="append",
        default=[],
        metavar="'SCRIPT ARGS'",
        help="run this benchmark script in the guest instead of the tests (repeatable; OUT/figures.jsonl)",
    )
    parser.add_argument(
        "--v1-hybrid",
        action="store_true",
        help="with --bench: remount the guest's cgroups as v1 hybrid (this host's layout) first",
    )
    args = parser.parse_args(argv)
    if args.v1_hybrid and not args.bench:
        parser.error("--v1-hybrid: only with --bench (the guest tests are cgroup v2's)")
    modules = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in modules if name not in MODULES]
    if unknown or not modules:
        parser.error(f"--only: unknown {unknown or 'empty'}; choose from {', '.join(MODULES)}")

    # SIGTERM (make killed, CI cancel) must still take qemu down: turn it into the finally path.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    kernel, vng = ensure_prerequisites()
    out = args.out or Path(tempfile.mkdtemp(prefix="kn-cg2-", dir="/tmp"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    what = f"benchmarks: {'; '.join(args.bench)}" if args.bench else f"modules: {', '.join(modules)}"
    cgroups = "cgroup v1 hybrid" if args.v1_hybrid else "cgroup v2"
    print(f"test-cgroup2: booting {kernel.name} under qemu TCG (virtme-ng), {cgroups}, {what}", flush=True)
    if args.bench:
        command = bench_command(out, args.bench, v1_hybrid=args.v1_hybrid)
    else:
        command = guest_command(out, modules, args.select)
    compile_checkout()
    rc = run_guest(kernel, vng, out, command, args.deadline, tuple(args.share))
    took = time.monotonic() - started
    if took > BUDGET_S and not args.bench:
        print(
            f"test-cgroup2: note: the guest run took {took:.0f} s, over its {BUDGET_S} s budget (host load?)"
        )
    print("\n=== cgroup v2 guest transcript ===")
    print(transcript(out, bench=bool(args.bench)))
    print(
        f"=== guest run {took:.0f} s (boot + {'benchmarks' if args.bench else 'tests'}), status {rc} ===",
        flush=True,
    )
    if rc != 0:
        print(f"test-cgroup2: FAILED; transcript and console in {out}", file=sys.stderr)
        return 1
    if args.out is None:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
