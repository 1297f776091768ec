"""Command-line entry for `kubenode apiserver`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

DEFAULT_DATA_DIR = "/var/lib/kubenode/apiserver"


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _duration(text: str) -> float:
    """Go-style durations as kube-apiserver's flags take them: 1h, 30m, 90s, 1h30m."""
    import re

    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?", text.strip())
    if not text.strip() or parts is None:
        raise argparse.ArgumentTypeError(f"not a duration like 1h, 30m or 90s: {text!r}")
    hours, minutes, seconds = parts.groups()
    total = int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)
    if total <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return total


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0-65535, got {text}")
    return value


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "apiserver",
        help="serve the Kubernetes API (nodes, pods, services, events, namespaces, leases) from SQLite",
    )
    parser.add_argument(
        "--data-dir",
        default=DEFAULT_DATA_DIR,
        help=f"database, tokens, certificates (default {DEFAULT_DATA_DIR})",
    )
    parser.add_argument(
        "--bind-address",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1); HTTPS on every address, loopback included",
    )
    parser.add_argument("--port", type=_port, default=6443, help="port to listen on (0 picks a free one)")
    parser.add_argument(
        "--token-auth-file",
        help="kube's static token CSV (default: <data-dir>/tokens.csv, made on first start)",
    )
    parser.add_argument(
        "--write-kubeconfig",
        help="where to write the admin kubeconfig (default: <data-dir>/admin.kubeconfig)",
    )
    parser.add_argument(
        "--authorization-mode", default="Node,RBAC", help="Node,RBAC (default) or AlwaysAllow"
    )
    parser.add_argument(
        "--authorization-policy-file",
        metavar="FILE",
        help="YAML with Roles, ClusterRoles and their bindings for RBAC to enforce (other kinds are skipped)",
    )
    parser.add_argument(
        "--admission-control-config-file",
        metavar="FILE",
        help="kube's AdmissionConfiguration: the PodSecurity plugin's defaults and exemptions",
    )
    parser.add_argument(
        "--default-watch-cache-size",
        type=_positive,
        default=10000,
        help="events kept for watches to resume from (older resourceVersions get 410 Expired)",
    )
    parser.add_argument(
        "--watch-bookmark-interval",
        type=_duration,
        default="1m",
        help="how often an idle watch that allows bookmarks gets a BOOKMARK (default 1m, as kube's cacher;"
        " one more comes 2s before timeoutSeconds ends)",
    )
    parser.add_argument(
        "--event-ttl",
        type=_duration,
        default="1h",
        help="how long events are kept after they last happened (e.g. 1h, 30m, 90s; default 1h)",
    )
    parser.add_argument(
        "--service-account-issuer",
        default="",
        help="the `iss` of ServiceAccount tokens, also the API audience "
        "(default https://kubernetes.default.svc.cluster.local, as kubeadm)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from apiserver.daemon import Options
    from apiserver.daemon import run as run_daemon

    options = Options(
        data_dir=Path(args.data_dir),
        bind_address=args.bind_address,
        port=args.port,
        token_auth_file=Path(args.token_auth_file) if args.token_auth_file else None,
        write_kubeconfig=Path(args.write_kubeconfig) if args.write_kubeconfig else None,
        authorization_mode=args.authorization_mode,
        authorization_policy_file=(
            Path(args.authorization_policy_file) if args.authorization_policy_file else None
        ),
        admission_config_file=(
            Path(args.admission_control_config_file) if args.admission_control_config_file else None
        ),
        watch_cache_size=args.default_watch_cache_size,
        event_ttl=args.event_ttl,
        bookmark_interval=args.watch_bookmark_interval,
        service_account_issuer=args.service_account_issuer,
    )
    return run_daemon(options)
