"""Command-line entry for `kubenode deviceplugin` (serve), `kubenode deviceplugin discover`, and
`kubenode deviceplugin remove-cdi-specs` (uninstall: `make uninstall` runs it before removing the hook)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deviceplugin.config import PluginConfig


def _add_config_options(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument(
        "--config", metavar="FILE", default=default, help="YAML config (default: one cpu resource)"
    )
    parser.add_argument(
        "--kubelet-dir",
        metavar="DIR",
        default=default,
        help="kubelet device-plugin dir (precedence: this flag, $KUBENODE_KUBELET_DIR, config, default)",
    )
    parser.add_argument(
        "--backend",
        choices=["cpu", "gpu", "static"],
        default=default,
        help="without --config: serve one resource kubenode.io/<backend> with default options",
    )


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "deviceplugin", help="serve device plugins (CPU cores, GPUs, static devices) to the kubelet"
    )
    _add_config_options(parser, None)
    parser.add_argument(
        "--create-dirs",
        action="store_true",
        help="make the kubelet dir if it is missing (by default a missing dir is an error: a typo would"
        " otherwise wait forever for a kubelet that never comes)",
    )
    parser.add_argument(
        "--metrics-bind-address",
        metavar="HOST:PORT",
        help="serve Prometheus /metrics and /healthz, /readyz here (port 0: any; default: none)",
    )
    parser.set_defaults(func=run)
    commands = parser.add_subparsers(dest="deviceplugin_command", metavar="[discover|remove-cdi-specs]")
    discover = commands.add_parser("discover", help="print what would be advertised and exit")
    # SUPPRESS: options given before `discover` are not overwritten by the sub-parser's defaults.
    _add_config_options(discover, argparse.SUPPRESS)
    discover.add_argument("--json", action="store_true", help="print JSON instead of a table")
    discover.set_defaults(func=run_discover)
    remove = commands.add_parser(
        "remove-cdi-specs",
        help="remove the CDI spec file of every cpu resource (uninstall: its hook is about to go)",
    )
    _add_config_options(remove, argparse.SUPPRESS)
    remove.set_defaults(func=run_remove_cdi_specs)

    from deviceplugin.dra.cli import register as register_dra_driver  # flags only; no grpc at import

    register_dra_driver(subparsers)


def _load(args: argparse.Namespace) -> tuple[PluginConfig, str]:
    from deviceplugin.config import default_config, load_config, resolve_kubelet_dir

    if args.config and args.backend:
        raise SystemExit("kubenode deviceplugin: --backend only applies without --config")
    config = load_config(args.config) if args.config else default_config(args.backend or "cpu")
    return config, resolve_kubelet_dir(args.kubelet_dir, config)


def run_discover(args: argparse.Namespace) -> int:
    from deviceplugin.backend import BackendError
    from deviceplugin.config import ConfigError
    from deviceplugin.discover import discover, render_json, render_table

    try:
        config, kubelet_dir = _load(args)
        resources = discover(config, kubelet_dir)
    except (ConfigError, BackendError, OSError) as exc:
        print(f"kubenode deviceplugin discover: {exc}", file=sys.stderr)
        return 2
    try:
        print(render_json(resources) if args.json else render_table(resources), flush=True)
    except BrokenPipeError:  # e.g. piped into `head`: not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def run_remove_cdi_specs(args: argparse.Namespace) -> int:
    """For uninstalling: a spec left behind would name a hook that is gone, failing every container start
    of its sets. With the plugin stopped first (it rewrites a missing file at the next Allocate)."""
    from deviceplugin.cdi import SpecError, remove_spec
    from deviceplugin.config import ConfigError

    try:
        config, _ = _load(args)
    except ConfigError as exc:
        print(f"kubenode deviceplugin remove-cdi-specs: {exc}", file=sys.stderr)
        return 2
    status = 0
    for resource in config.resources:
        if resource.backend != "cpu":
            continue
        try:
            removed = remove_spec(resource.cpu.cdi_spec_dir, resource.name)
        except (SpecError, OSError) as exc:
            print(f"kubenode deviceplugin remove-cdi-specs: {resource.name}: {exc}", file=sys.stderr)
            status = 1
            continue
        if removed is not None:
            print(f"removed {removed}")
    return status


def run(args: argparse.Namespace) -> int:
    import logging
    import signal

    from deviceplugin.backend import BackendError
    from deviceplugin.config import ConfigError
    from deviceplugin.endpoint import EndpointError
    from deviceplugin.manager import PluginManager
    from kubenode import __version__

    try:
        if args.metrics_bind_address is not None:
            from kubenode.metricshttp import parse_bind_address

            parse_bind_address(args.metrics_bind_address)  # a usage error before any backend starts
        config, kubelet_dir = _load(args)
        if not args.create_dirs and not os.path.isdir(kubelet_dir):
            problem = "is not a directory" if os.path.exists(kubelet_dir) else "does not exist"
            raise ConfigError(
                f"kubelet dir {kubelet_dir} {problem} (a typo? is the kubelet installed?);"
                " --create-dirs makes it"
            )
        manager = PluginManager(config, kubelet_dir)
    except (ConfigError, BackendError, EndpointError, OSError, ValueError) as exc:
        print(f"kubenode deviceplugin: {exc}", file=sys.stderr)
        return 2
    metrics_server = None
    if args.metrics_bind_address is not None:
        from deviceplugin.metrics import serve_metrics

        try:
            metrics_server = serve_metrics(manager, args.metrics_bind_address)
        except OSError as exc:
            manager.close()
            print(
                f"kubenode deviceplugin: --metrics-bind-address {args.metrics_bind_address}: {exc}",
                file=sys.stderr,
            )
            return 1
        logging.getLogger("deviceplugin").info(
            "serving /metrics and /healthz on port %d", metrics_server.port
        )
    logging.getLogger("deviceplugin").info(
        "kubenode %s deviceplugin: %s for the kubelet in %s",
        __version__,
        ", ".join(r.config.name for r in manager.resources),
        kubelet_dir,
    )
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: manager.stop())
    try:
        manager.run()
    except (EndpointError, OSError) as exc:
        print(f"kubenode deviceplugin: {exc}", file=sys.stderr)
        return 1
    finally:
        if metrics_server is not None:
            metrics_server.stop()
    return 0
