"""Command-line entry for `kubenode conformance`: play the kubelet against a device plugin."""

from __future__ import annotations

import argparse
from typing import Any

from kubenode.deviceapi import DEFAULT_KUBELET_DIR, KUBELET_DIR_ENV, KUBELET_SOCKET


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "conformance",
        help="play the kubelet against a device plugin and report what passes",
        description=(
            f"Serve {KUBELET_SOCKET} in DIR like the kubelet, wait for a device plugin to register, and run "
            "named checks against it. One line per check (PASS/FAIL/SKIP), then a summary; exit 0 only if "
            "none failed."
        ),
    )
    parser.add_argument(
        "--kubelet-dir",
        metavar="DIR",
        help=f"device-plugin dir (default {DEFAULT_KUBELET_DIR}, or a fresh temp dir with --plugin-cmd)",
    )
    parser.add_argument(
        "--create-dirs",
        action="store_true",
        help="make --kubelet-dir if it is missing (by default a missing dir is an error)",
    )
    parser.add_argument(
        "--plugin-cmd",
        metavar="CMD",
        help="start the plugin with this shell command "
        f"({KUBELET_DIR_ENV}=DIR in its environment) and stop it afterwards",
    )
    parser.add_argument(
        "--dra-driver-cmd",
        metavar="CMD",
        help="play the kubelet against a DRA driver started by this shell command instead (REGISTRY_DIR, "
        "PLUGIN_DIR, CDI_DIR, KUBECONFIG of an embedded API server and NODE_NAME in its environment)",
    )
    parser.add_argument(
        "--resource", metavar="NAME", help="check only this resource (default: all that register)"
    )
    parser.add_argument(
        "--only",
        metavar="CHECK",
        action="append",
        default=[],
        help="run only these checks or groups (repeatable, comma-separated; see --list)",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--junit", metavar="FILE", help="also write JUnit XML to FILE")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    parser.add_argument(
        "--register-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="how long to wait for the first Register (default 30)",
    )
    parser.add_argument(
        "--restart-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="how long to wait for re-registration after the kubelet restart (default 30); with "
        "--dra-driver-cmd, after the registry directory is recreated",
    )
    parser.add_argument(
        "--slices-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="with --dra-driver-cmd: how long to wait for the driver's ResourceSlices (default 30)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import shutil
    import sys
    import tempfile
    import time
    from pathlib import Path

    from conformance.checks import PER_RESOURCE_CHECKS, RESTART_CHECK
    from conformance.harness import HarnessError
    from conformance.results import Status, summary_line, text_line, to_json, write_junit
    from conformance.suite import SuiteConfig, run_suite, select_checks
    from conformance.target import Limits

    if args.dra_driver_cmd:
        return _run_dra(args)
    if args.list:
        for check in PER_RESOURCE_CHECKS:
            print(f"{check.name:<36} {check.about}")
        print(
            f"{RESTART_CHECK:<36} the plugin registers again after a kubelet restart, without being restarted"
        )
        return 0
    only = [part for item in args.only for part in item.split(",") if part]
    try:
        select_checks(only)
    except ValueError as err:
        print(f"kubenode conformance: {err}", file=sys.stderr)
        return 2
    temp_dir = None
    if args.kubelet_dir:
        kubelet_dir = Path(args.kubelet_dir)
    elif args.plugin_cmd:
        kubelet_dir = temp_dir = Path(tempfile.mkdtemp(prefix="kn-conf-", dir="/tmp"))
    else:
        kubelet_dir = Path(DEFAULT_KUBELET_DIR)
    if temp_dir is None and not args.create_dirs and not kubelet_dir.is_dir():
        # A typo would otherwise make a stray directory and wait out --register-timeout for nothing.
        problem = "is not a directory" if kubelet_dir.exists() else "does not exist"
        print(
            f"kubenode conformance: --kubelet-dir {kubelet_dir} {problem}; --create-dirs makes it",
            file=sys.stderr,
        )
        return 2
    limits = Limits(register=args.register_timeout, restart=args.restart_timeout)
    config = SuiteConfig(kubelet_dir, args.plugin_cmd, args.resource, only, limits)
    emit = (lambda r: None) if args.json else (lambda r: print(text_line(r), flush=True))
    started = time.monotonic()
    try:
        results = run_suite(config, emit)
    except (HarnessError, OSError) as err:
        print(f"kubenode conformance: {err}", file=sys.stderr)
        return 2
    finally:
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)
    seconds = time.monotonic() - started
    if args.json:
        print(to_json(results, seconds))
    else:
        print(summary_line(results, seconds))
    if args.junit:
        write_junit(Path(args.junit), results, seconds)
    return 1 if any(r.status is Status.FAIL for r in results) else 0


def _run_dra(args: argparse.Namespace) -> int:
    import sys
    import time
    from pathlib import Path

    from conformance.dra.suite import run_dra_suite
    from conformance.dra.target import DraWaits
    from conformance.results import Status, summary_line, text_line, to_json, write_junit

    emit = (lambda r: None) if args.json else (lambda r: print(text_line(r), flush=True))
    started = time.monotonic()
    try:
        waits = DraWaits(args.register_timeout, args.slices_timeout, args.restart_timeout)
        results = run_dra_suite(args.dra_driver_cmd, waits, emit)
    except (RuntimeError, OSError) as err:
        print(f"kubenode conformance: {err}", file=sys.stderr)
        return 2
    seconds = time.monotonic() - started
    print(to_json(results, seconds) if args.json else summary_line(results, seconds))
    if args.junit:
        write_junit(Path(args.junit), results, seconds)
    return 1 if any(r.status is Status.FAIL for r in results) else 0
