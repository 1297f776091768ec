"""`kubenode up`: a one-machine cluster that kubectl drives (see cli/up/cluster.py for what runs).

    start (a progress line per component) -> write <data-dir>/kubeconfig, print `export KUBECONFIG=...`
    -> apply examples/pods through the API (create or patch; the scheduler places them)
    -> the live pod table until Ctrl-C (redrawn on a terminal, one line per change when piped),
       or with --once until every applied pod is Running or Failed: the table, then exit 0 only if
       every pod got what it asked for (cli/up/table.py `shortfalls`)
    -> stop in reverse order; the agent's pods are drained: no process or cgroup is left.

One run per data directory (kubenode/runlock.py): a second `up` says who runs and exits 1. A run that
crashed leaves its state in the data directory: the next one ends any daemon still running from it and
starts on the same database and agent state, so the agent adopts the pods that survived.
Errors are one line: 2 for a bad flag or file, 1 for a component that did not start.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

DEFAULT_CGROUP_ROOT = "/kubenode-up"
DEFAULT_PORT = 6443
ONCE_TIMEOUT_S = 120.0


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "up", help="run a one-machine cluster (API server, device plugin, agent, scheduler) for kubectl"
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="wait for every pod to be Running or Failed, print the table, stop (0: each got what it asked)",
    )
    parser.add_argument(
        "--data-dir", type=Path, help="where the cluster's state lives (default: .kubenode in the checkout)"
    )
    parser.add_argument(
        "--pods", type=Path, help="pod manifests to apply (default: examples/pods; an empty directory: none)"
    )
    parser.add_argument(
        "--plugin-config",
        type=Path,
        help="device plugin config (default: examples/up-plugins.yaml; NVML's GPUs when it finds some)",
    )
    parser.add_argument(
        "--cgroup-root",
        default=DEFAULT_CGROUP_ROOT,
        help=f"cgroup under which the agent makes kubepods (default {DEFAULT_CGROUP_ROOT})",
    )
    parser.add_argument(
        "--container-runtime-endpoint",
        help="the agent's CRI runtime, unix:///path; pods with images run there (docs/runtime.md)",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"API server port (default {DEFAULT_PORT}; 0: any)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=ONCE_TIMEOUT_S,
        help=f"--once: seconds to wait for the pods (default {ONCE_TIMEOUT_S:.0f})",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cli.up.cluster import checkout
    from kubenode import runlock

    data_dir = (args.data_dir or checkout() / ".kubenode").resolve()
    for flag, path in (("--pods", args.pods), ("--plugin-config", args.plugin_config)):
        if path is not None and not path.exists():
            print(f"kubenode up: {flag} {path}: no such file or directory", file=sys.stderr)
            return 2
    if not args.cgroup_root.startswith("/"):
        print(
            f"kubenode up: --cgroup-root: must be an absolute path, got {args.cgroup_root!r}", file=sys.stderr
        )
        return 2
    if args.container_runtime_endpoint:
        from kubenode.criendpoint import socket_path

        try:
            socket_path(args.container_runtime_endpoint)
        except ValueError as exc:
            print(f"kubenode up: --container-runtime-endpoint: {exc}", file=sys.stderr)
            return 2
    if not 0 <= args.port <= 65535:
        print(f"kubenode up: --port {args.port}: must be 0-65535", file=sys.stderr)
        return 2
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        with runlock.hold(f"kubenode up {data_dir}", "kubenode up"):
            from cli.up.session import Session

            return Session(args, data_dir).run()
    except runlock.LockHeld as exc:
        print(
            f"kubenode up: already running ({exc.holder}) on {data_dir}; its cluster:"
            f" export KUBECONFIG={data_dir / 'kubeconfig'}",
            file=sys.stderr,
        )
        return 1
