"""The `kubenode` command: one entry point, one subcommand per part of the product.

Each part owns a small `cli` module with `register(subparsers)`, which only adds
its argparse parser; heavy imports happen inside the command's handler, so
`kubenode deviceplugin` never pays for the scheduler's imports and vice versa.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

# Modules that contribute subcommands, in the order `kubenode --help` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "kubenode.up",
    "deviceplugin.cli",
    "agent.cli",
    "agent.conformance.cli",
    "scheduler.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubenode",
        description="Exact CPU and GPU allocation: device plugins, a node agent and a scheduler.",
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="logging level"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        result: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
