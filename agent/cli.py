"""Command-line entry for `kubenode agent`."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "agent", help="run the node agent (a lightweight kubelet for processes)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise SystemExit("kubenode agent: not implemented yet")
