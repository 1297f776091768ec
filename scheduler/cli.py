"""Command-line entry for `kubenode scheduler`."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "scheduler", help="schedule pods onto nodes, or simulate it"
    )
    commands = parser.add_subparsers(dest="scheduler_command", required=True)
    simulate = commands.add_parser(
        "simulate", help="place the pending pods of a cluster file with the scheduling engine"
    )
    simulate.add_argument("--cluster", required=True, help="YAML or JSON file of Node and Pod objects")
    simulate.add_argument("--profile", help="KubeSchedulerConfiguration file (profiles, weights, strategies)")
    simulate.add_argument("--output", choices=("table", "json"), default="table")
    simulate.add_argument("--seed", type=int, default=0, help="random seed for ties between equal nodes")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kubenode.model.errors import ValidationError
    from scheduler.profile import Configuration, load_configuration
    from scheduler.report import render_json, render_table
    from scheduler.simulate import read_cluster, simulate

    try:
        config = load_configuration(Path(args.profile)) if args.profile else Configuration()
        cluster = read_cluster(Path(args.cluster))
    except ValidationError as exc:
        print(f"kubenode scheduler: {exc}", file=sys.stderr)
        return 2
    result = simulate(cluster, config, seed=args.seed)
    for error in result.errors:
        print(f"kubenode scheduler: {error}", file=sys.stderr)
    print(render_json(result) if args.output == "json" else render_table(result))
    return 0
