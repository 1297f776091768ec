"""`kubenode dra-driver`: the flags, then deviceplugin/dra/driver.py's `run`."""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "dra-driver",
        help="serve kubenode's DRA drivers (cpu.kubenode.io, gpu.kubenode.io) as a kubelet plugin",
    )
    parser.add_argument("--kubeconfig", metavar="FILE", help="API server access (default: in-cluster)")
    parser.add_argument(
        "--node-name",
        default=os.environ.get("NODE_NAME") or socket.gethostname(),
        help="the node whose ResourceSlices it publishes (default: $NODE_NAME, else the host name)",
    )
    parser.add_argument(
        "--registry-dir",
        metavar="DIR",
        default="/var/lib/kubelet/plugins_registry",
        help="where the registration sockets go (the kubelet's or the agent's --plugins-registry-dir)",
    )
    parser.add_argument(
        "--plugin-dir",
        metavar="DIR",
        default="/var/lib/kubelet/plugins",
        help="each driver's DRA socket and state go to DIR/<driver>/",
    )
    parser.add_argument("--cdi-dir", metavar="DIR", default="/var/run/cdi", help="where claim CDI specs go")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="YAML: drivers (default: all that apply), gpus (static), sysfsRoot, devRoot, cdiHookPath",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from deviceplugin.dra import driver

    base = driver.DriverOptions(
        node_name=args.node_name,
        registry_dir=Path(args.registry_dir),
        plugin_dir=Path(args.plugin_dir),
        cdi_dir=Path(args.cdi_dir),
    )
    try:
        options = driver.load_options(args.config, base)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"kubenode dra-driver: {exc}") from None
    return driver.run(options, args.kubeconfig)
