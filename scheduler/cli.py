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
    simulate.set_defaults(func=run)
    live = commands.add_parser("run", help="schedule the pending pods of an API server, as kube-scheduler")
    live.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account)")
    live.add_argument("--profile", help="KubeSchedulerConfiguration file (the one simulate reads)")
    live.add_argument("--leader-elect", action="store_true", help="only the holder of a Lease schedules")
    live.add_argument("--lock-object-namespace", default="kube-system", help="the Lease's namespace")
    live.add_argument("--lock-object-name", default="kubenode-scheduler", help="the Lease's name")
    live.add_argument("--leader-elect-lease-duration", type=float, default=15.0, metavar="SECONDS")
    live.add_argument("--leader-elect-renew-deadline", type=float, default=10.0, metavar="SECONDS")
    live.add_argument("--leader-elect-retry-period", type=float, default=2.0, metavar="SECONDS")
    live.add_argument(
        "--metrics-bind-address", metavar="HOST:PORT", help="serve /metrics and /healthz here (port 0: any)"
    )
    live.add_argument(
        "--binding-workers",
        type=int,
        default=64,
        help="binds in flight at once (the client's reactor opens twice as many connections: binds, events)",
    )
    live.set_defaults(func=run_live)
    extender = commands.add_parser(
        "extender", help="serve /filter, /prioritize and /bind to kube-scheduler as a scheduler extender"
    )
    extender.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account)")
    extender.add_argument("--profile", help="KubeSchedulerConfiguration file: the score strategies to use")
    extender.add_argument("--bind-address", default="0.0.0.0", help="address to listen on")
    extender.add_argument("--port", type=int, default=8888, help="port to listen on (0: any free port)")
    extender.add_argument("--tls-cert-file", help="serve HTTPS with this certificate (PEM)")
    extender.add_argument("--tls-private-key-file", help="the certificate's private key (PEM)")
    extender.set_defaults(func=run_extender)


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


def run_live(args: argparse.Namespace) -> int:
    from pathlib import Path

    from kubenode.kubeclient import KubeConfigError, load
    from kubenode.kubeclient.leaderelection import ElectionConfig
    from kubenode.model.errors import ValidationError
    from scheduler.metrics import parse_bind_address
    from scheduler.profile import Configuration, load_configuration
    from scheduler.runner import RunOptions, run_scheduler

    try:
        config = load_configuration(Path(args.profile)) if args.profile else Configuration()
        client_config = load(args.kubeconfig)
        address = parse_bind_address(args.metrics_bind_address) if args.metrics_bind_address else None
    except (ValidationError, KubeConfigError, ValueError) as exc:
        print(f"kubenode scheduler: {exc}", file=sys.stderr)
        return 2
    if args.binding_workers < 1:
        print("kubenode scheduler: --binding-workers must be at least 1", file=sys.stderr)
        return 2
    election = ElectionConfig(
        name=args.lock_object_name,
        namespace=args.lock_object_namespace,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
    )
    problem = election.problem()
    if args.leader_elect and problem:
        print(f"kubenode scheduler: --leader-elect: {problem}", file=sys.stderr)
        return 2
    options = RunOptions(
        config,
        leader_elect=args.leader_elect,
        election=election,
        metrics_address=address,
        binding_workers=args.binding_workers,
    )
    return run_scheduler(client_config, options)


def run_extender(args: argparse.Namespace) -> int:
    import ssl
    from pathlib import Path

    from kubenode.kubeclient import KubeConfigError, load
    from kubenode.model.errors import ValidationError
    from scheduler.extender.server import run_extender as serve
    from scheduler.extender.server import server_ssl_context
    from scheduler.profile import Configuration, load_configuration

    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        print("kubenode scheduler: --tls-cert-file and --tls-private-key-file go together", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"kubenode scheduler: --port {args.port} is not a port number", file=sys.stderr)
        return 2
    try:
        config = load_configuration(Path(args.profile)) if args.profile else Configuration()
        client_config = load(args.kubeconfig)
        tls = None
        if args.tls_cert_file:
            tls = server_ssl_context(args.tls_cert_file, args.tls_private_key_file)
    except (ValidationError, KubeConfigError) as exc:
        print(f"kubenode scheduler: {exc}", file=sys.stderr)
        return 2
    except (OSError, ssl.SSLError) as exc:
        print(f"kubenode scheduler: --tls-cert-file/--tls-private-key-file: {exc}", file=sys.stderr)
        return 2
    return serve(client_config, config, args.bind_address, args.port, tls)
