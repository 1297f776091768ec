"""Command-line entry for `kubenode conformance`."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "conformance", help="play the kubelet against a device plugin and report what passes"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise SystemExit("kubenode conformance: not implemented yet")
