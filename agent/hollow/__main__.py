"""`python -m agent.hollow --kubeconfig K --nodes N`: run N hollow nodes until SIGTERM or SIGINT.

Prints `ready <N>` once every node has started (registration and the first Lease follow in the
nodes' own threads); the ledger (`--ledger`) gets a line per pretend start and stop.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import tempfile
import threading
from pathlib import Path

from agent.hollow.fleet import START_SPREAD_S, HollowFleet
from agent.hollow.standins import Ledger

# Each hollow node keeps the real agent's threads (a pod worker per pod among them): a small stack
# keeps thousands of them cheap in address space; none of them recurses deeply.
THREAD_STACK_BYTES = 512 * 1024


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
    parser.add_argument("--log-level", default="WARNING", type=str.upper)
    args = parser.parse_args(argv)
    if args.nodes < 1:
        print("--nodes: must be at least 1", file=sys.stderr)
        return 2
    if not args.kubeconfig.is_file():
        print(f"--kubeconfig: {args.kubeconfig}: no such file", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    threading.stack_size(THREAD_STACK_BYTES)
    state_dir = args.state_dir or Path(tempfile.mkdtemp(prefix="kubenode-hollow-", dir="/dev/shm"))
    out = open(args.ledger, "a", buffering=1, encoding="utf-8") if args.ledger else None  # noqa: SIM115
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    fleet = HollowFleet(args.kubeconfig, args.nodes, state_dir, Ledger(out), prefix=args.prefix)
    try:
        fleet.start(args.start_spread)
        print(f"ready {args.nodes}", flush=True)
        stopping.wait()
    finally:
        fleet.stop()
        if out is not None:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
