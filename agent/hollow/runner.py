"""The fleet process (`python -m agent.hollow`, after __main__.py chose the driver): N hollow nodes until
SIGTERM or SIGINT.

Prints `ready <N>` once every node has started (registration and the first Lease follow in the
nodes' own loops); the ledger (`--ledger`) gets a line per pretend start and stop. With the threads
driver the GIL's switch interval is raised and thread stacks made small (many threads, one GIL);
under gevent neither matters (one OS thread).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import tempfile
import threading
from pathlib import Path

from agent.hollow.driver import DEFAULT_DRIVER, DRIVERS, LoopProfile, patched
from agent.hollow.fleet import MAX_CONNECTIONS, START_SPREAD_S, HollowFleet
from agent.hollow.sampler import StackSampler, ThreadProfiles
from agent.hollow.standins import Ledger
from kubenode.stopsignal import wait_for_stop

# With the threads driver each hollow node keeps the real agent's threads (a pod worker per pod among
# them): a small stack keeps thousands of them cheap in address space; none of them recurses deeply.
THREAD_STACK_BYTES = 512 * 1024
# How long a thread may hold the GIL while others wait (CPython's default is 5 ms). Every thread
# waiting for the GIL wakes once per interval to ask for it: with hundreds of nodes' threads in a
# process, a few hundred runnable at once after a slow second woke ~100,000 times a second, most of
# the process's CPU (in the kernel), starving the threads that would have caught up. At 50 ms they
# ask 10x less often (20 ms held N = 500 but not N = 1,000 at 30 pods a node; 100 ms made requests
# wait too long for the GIL to read their answers). A thread that blocks on I/O still hands the GIL
# over at once.
SWITCH_INTERVAL_S = 0.05


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.hollow", description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", type=Path, required=True, help="the cluster every node joins")
    parser.add_argument("--nodes", type=int, default=10, help="how many hollow nodes (default 10)")
    parser.add_argument("--prefix", default="hollow-", help="node names are <prefix><index>")
    parser.add_argument("--state-dir", type=Path, help="pod records (default: a new directory in /dev/shm)")
    parser.add_argument("--ledger", type=Path, help="file for the start/stop lines (default: none)")
    parser.add_argument(
        "--start-spread", type=float, default=START_SPREAD_S, help="seconds over which the nodes start (10)"
    )
    parser.add_argument(
        "--switch-interval", type=float, default=SWITCH_INTERVAL_S, help="the GIL's switch interval, seconds"
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=MAX_CONNECTIONS,
        help=f"unary requests on the wire at once, all nodes together (default {MAX_CONNECTIONS})",
    )
    parser.add_argument(
        "--driver",
        choices=DRIVERS,
        default=DEFAULT_DRIVER,
        help="gevent: every node's loops on one event loop (default); threads: an OS thread each",
    )
    parser.add_argument(
        "--sample-stacks",
        type=Path,
        help="write where the threads spent their time here at exit (under gevent: a .pstats profile, "
        "restarted by SIGUSR1 to cover a window only)",
    )
    parser.add_argument("--log-level", default="WARNING", type=str.upper)
    args = parser.parse_args(argv)
    if args.nodes < 1:
        print("--nodes: must be at least 1", file=sys.stderr)
        return 2
    if not args.kubeconfig.is_file():
        print(f"--kubeconfig: {args.kubeconfig}: no such file", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    on_loop = patched()
    if args.driver == "gevent" and not on_loop:
        print(
            "--driver gevent: run as `python -m agent.hollow` (it patches before the agent loads)",
            file=sys.stderr,
        )
        return 2
    if not on_loop:
        threading.stack_size(THREAD_STACK_BYTES)
        sys.setswitchinterval(args.switch_interval)
    state_dir = args.state_dir or Path(tempfile.mkdtemp(prefix="kubenode-hollow-", dir="/dev/shm"))
    out = open(args.ledger, "a", encoding="utf-8") if args.ledger else None  # noqa: SIM115
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        if on_loop:  # a handler the loop runs at once (a plain one waits for Python code to run)
            import gevent

            gevent.signal_handler(sig, stopping.set)
        else:
            signal.signal(sig, lambda *_: stopping.set())
    sampler: StackSampler | ThreadProfiles | LoopProfile | None = None
    if args.sample_stacks and on_loop:
        sampler = LoopProfile(args.sample_stacks)
    elif args.sample_stacks:
        is_pstats = args.sample_stacks.suffix == ".pstats"
        sampler = (ThreadProfiles if is_pstats else StackSampler)(args.sample_stacks)
    if sampler is not None:
        sampler.start()
    if isinstance(sampler, LoopProfile):  # SIGUSR1: profile from now on (a quiet window, not the start-up)
        import gevent

        gevent.signal_handler(signal.SIGUSR1, sampler.restart)
    fleet = HollowFleet(
        args.kubeconfig,
        args.nodes,
        state_dir,
        Ledger(out),
        prefix=args.prefix,
        max_connections=args.max_connections,
    )
    try:
        fleet.start(args.start_spread)
        print(f"ready {args.nodes}", flush=True)
        wait_for_stop(stopping)  # in slices: a SIGTERM may land on a node's thread (kubenode/stopsignal.py)
    finally:
        fleet.stop()
        if sampler is not None:
            sampler.stop()
        if out is not None:
            out.close()
    return 0
