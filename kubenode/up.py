"""Command-line entry for `kubenode up`."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "up", help="run the main job on this machine with embedded defaults"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise SystemExit("kubenode up: not implemented yet")
