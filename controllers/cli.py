"""Command-line entry for `kubenode controller-manager`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def _boolean(text: str) -> bool:
    """Go's flag syntax for a bool that defaults to true: --leader-elect=false."""
    value = text.strip().lower()
    if value in ("true", "1", "t"):
        return True
    if value in ("false", "0", "f"):
        return False
    raise argparse.ArgumentTypeError(f"want true or false, got {text!r}")


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "controller-manager",
        help="run the node lifecycle, garbage collector, ReplicaSet, Deployment, DaemonSet, Job and "
        "ServiceAccount controllers and the root CA publisher",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account)")
    parser.add_argument(
        "--leader-elect",
        type=_boolean,
        nargs="?",
        const=True,
        default=True,
        metavar="BOOL",
        help="only the holder of a Lease runs the controllers (default true; --leader-elect=false)",
    )
    parser.add_argument(
        "--leader-elect-resource-namespace", default="kube-system", help="the Lease's namespace"
    )
    parser.add_argument(
        "--leader-elect-resource-name", default="kube-controller-manager", help="the Lease's name"
    )
    parser.add_argument("--leader-elect-lease-duration", type=float, default=15.0, metavar="SECONDS")
    parser.add_argument("--leader-elect-renew-deadline", type=float, default=10.0, metavar="SECONDS")
    parser.add_argument("--leader-elect-retry-period", type=float, default=2.0, metavar="SECONDS")
    parser.add_argument(
        "--root-ca-file",
        help="the CA bundle published as the kube-root-ca.crt ConfigMap in every namespace "
        "(default: the kubeconfig's certificate authority)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from controllers.manager import ManagerOptions, run_controller_manager
    from kubenode.kubeclient import KubeConfigError, load
    from kubenode.kubeclient.leaderelection import ElectionConfig

    election = ElectionConfig(
        name=args.leader_elect_resource_name,
        namespace=args.leader_elect_resource_namespace,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
    )
    problem = election.problem()
    if args.leader_elect and problem:
        print(f"kubenode controller-manager: --leader-elect: {problem}", file=sys.stderr)
        return 2
    try:
        client_config = load(args.kubeconfig)
    except KubeConfigError as exc:
        print(f"kubenode controller-manager: {exc}", file=sys.stderr)
        return 2
    try:
        root_ca = Path(args.root_ca_file).read_text() if args.root_ca_file else ""
    except OSError as exc:
        print(
            f"kubenode controller-manager: --root-ca-file {args.root_ca_file}: {exc.strerror}",
            file=sys.stderr,
        )
        return 2
    return run_controller_manager(client_config, ManagerOptions(args.leader_elect, election, root_ca))
