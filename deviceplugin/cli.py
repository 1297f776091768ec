"""Command-line entry for `kubenode deviceplugin`."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "deviceplugin", help="serve device plugins (CPU cores, GPUs, static devices) to the kubelet"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise SystemExit("kubenode deviceplugin: not implemented yet")
