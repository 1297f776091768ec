"""`kubenode trace pod NAME [-n NS] [--output json]`: the command's parser only.

Every `kubenode` command builds all parsers, so this module imports nothing heavy: the client layer,
TLS and the cgroup readers are imported by `run`, from cli/podtrace.py, which does the tracing.
"""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "trace", help="show one pod's path: scheduler, node, devices, cgroup files, processes"
    )
    kinds = parser.add_subparsers(dest="kind", metavar="pod", required=True)
    pod = kinds.add_parser("pod", help="trace a pod")
    pod.add_argument("name", help="the pod's name")
    pod.add_argument("-n", "--namespace", default="default", help="its namespace (default: default)")
    pod.add_argument("--output", choices=("text", "json"), default="text", help="text (default) or json")
    pod.add_argument("--kubeconfig", help="kubeconfig (default: $KUBECONFIG, then ~/.kube/config)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cli import podtrace

    return podtrace.run(args)
