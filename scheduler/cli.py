"""Command-line entry for `kubenode scheduler`."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "scheduler", help="schedule pods onto nodes, or simulate it"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise SystemExit("kubenode scheduler: not implemented yet")
