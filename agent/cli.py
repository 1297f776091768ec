"""Command-line entry for `kubenode agent` (run the node agent) and `kubenode agent status`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "agent", help="run the node agent (a lightweight kubelet for processes)"
    )
    parser.add_argument("--config", type=Path, help="YAML settings file (flags override it)")
    parser.add_argument(
        "--manifests", type=Path, help="pod manifest directory (default /etc/kubenode/manifests)"
    )
    parser.add_argument("--node-name", help="node name (default: the host name)")
    parser.add_argument("--state-dir", type=Path, help="state: pod records, logs (default /var/lib/kubenode)")
    parser.add_argument(
        "--cgroup-root",
        help="cgroup under which kubepods is made "
        "(default: / with cgroupfs; with systemd, the agent's own delegated cgroup)",
    )
    parser.add_argument(
        "--cgroup-driver", choices=["cgroupfs", "systemd"], help="cgroup naming (default cgroupfs)"
    )
    parser.add_argument(
        "--device-plugin-dir",
        help="where device plugins register (default /var/lib/kubenode/device-plugins; 'none' disables)",
    )
    parser.add_argument("--listen", help="status endpoint HOST:PORT (default 127.0.0.1:10256; '' disables)")
    parser.add_argument(
        "--pod-pids-limit", type=int, help="pids.max of every pod cgroup (default -1: unlimited)"
    )
    actions = parser.add_subparsers(dest="action", metavar="[status]")
    status = actions.add_parser("status", help="print the agent's pods as a table")
    status.add_argument("--listen", dest="status_listen", default=None, help="agent endpoint HOST:PORT")
    status.add_argument("--json", action="store_true", help="print the raw /pods JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "status":
        return _status(args)
    import os

    # Pods are started with fork+exec while gRPC threads run; gRPC's fork handlers only add noise then.
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    from agent.daemon import run_agent

    return run_agent(_config(args))


def _config(args: argparse.Namespace) -> Any:
    from agent.config import load_config

    config = load_config(args.config)
    overrides = {
        "manifests": args.manifests,
        "node_name": args.node_name,
        "state_dir": args.state_dir,
        "cgroup_root": args.cgroup_root,
        "cgroup_driver": args.cgroup_driver,
        "listen": args.listen,
        "pod_pids_limit": args.pod_pids_limit,
    }
    for name, value in overrides.items():
        if value is not None:
            setattr(config, name, value)
    if args.device_plugin_dir is not None:
        config.device_plugin_dir = (
            None if args.device_plugin_dir in ("", "none") else Path(args.device_plugin_dir)
        )
    config.validate("command line")
    return config


def _status(args: argparse.Namespace) -> int:
    import json
    import sys
    import urllib.error

    from agent.config import load_config
    from agent.statustable import fetch, render

    listen = args.status_listen or args.listen or load_config(args.config).listen
    try:
        document = fetch(listen)
    except (urllib.error.URLError, OSError) as exc:
        print(
            f"kubenode agent status: cannot reach the agent at http://{listen}/pods: {exc}", file=sys.stderr
        )
        return 1
    print(json.dumps(document, indent=1) if args.json else render(document))
    return 0
