"""`kubenode up`: run the node's parts together on this machine with embedded defaults.

The device plugin (examples/up-plugins.yaml: the CPU backend plus a static demo GPU)
registers with the kubelet-side device manager on a private directory; then the node
agent runs the example pod manifests (examples/pods, copied into the working directory
so they can be edited while it runs) under its own cgroup root, and `kubenode up` prints
what is advertised, the pods, their cgroups and their limits. It keeps running until
Ctrl-C (or exits at once with --once); on exit every pod is stopped and its cgroup
removed. Each part is one `_start_*` step on a shared ExitStack, stopped in reverse.

One run per cgroup root (kubenode/runlock.py): a second `kubenode up` on the same root is refused with
the first one's pid, since each would kill the other's pods as orphans. Errors are one line: 2 for a bad
flag or file, 1 for a failure to run (agent/starterrors.py words those).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubenode.ports import AGENT_STATUS_PORT

if TYPE_CHECKING:
    from agent.daemon import RunningAgent
    from agent.devicemanager import DeviceManager
    from deviceplugin.manager import PluginManager

READY_TIMEOUT_S = 15.0


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "up", help="run the main job on this machine with embedded defaults"
    )
    parser.add_argument("--once", action="store_true", help="print what is advertised and exit")
    parser.add_argument(
        "--plugin-config",
        metavar="FILE",
        help="device plugin config (default: examples/up-plugins.yaml, else the CPU backend alone)",
    )
    parser.add_argument("--manifests", metavar="DIR", help="pod manifests to run (default: examples/pods)")
    parser.add_argument(
        "--cgroup-root",
        default="/kubenode-up",
        help="cgroup under which kubepods is made (default /kubenode-up)",
    )
    parser.add_argument(
        "--listen",
        default=f"127.0.0.1:{AGENT_STATUS_PORT}",
        help=f"agent status endpoint (default 127.0.0.1:{AGENT_STATUS_PORT}; busy: any port)",
    )
    parser.add_argument(
        "--dir", metavar="DIR", help="working directory (default: a private temporary one, removed at exit)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """`kubenode up`, with its errors as one line: 2 for a bad flag or file, 1 for a failure to run."""
    import os
    import sys

    # Pods are started with fork+exec while gRPC threads run; gRPC's fork handlers only add noise then.
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

    from agent.config import describe_config_error
    from agent.starterrors import describe_start_error
    from deviceplugin.backend import BackendError
    from deviceplugin.config import ConfigError
    from kubenode import runlock
    from kubenode.model import ValidationError

    if args.manifests and not os.path.isdir(args.manifests):
        print(f"kubenode up: --manifests {args.manifests}: no such directory", file=sys.stderr)
        return 2
    try:
        # Two runs on one cgroup root would each kill the other's pods as orphans.
        with runlock.hold(runlock.cgroup_root_lock_name(args.cgroup_root), "kubenode up"):
            return _run(args)
    except runlock.LockHeld as exc:
        print(
            f"kubenode up: another run, {exc.holder}, already uses {exc.name}; stop it first,"
            " or give this one its own --cgroup-root",
            file=sys.stderr,
        )
        return 1
    except ValidationError as exc:
        print(f"kubenode up: {describe_config_error(exc)}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(f"kubenode up: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        message = describe_start_error(exc, args.listen)
        if message is None and isinstance(exc, BackendError):
            message = str(exc)
        if message is None:
            raise
        print(f"kubenode up: {message}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    import signal
    import sys

    from agent.devicemanager.listing import describe_resources

    with contextlib.ExitStack() as stack:
        workdir = _workdir(args.dir, stack)
        plugin_dir = workdir / "device-plugins"
        # Plugins first: they wait for kubelet.sock like on a real node, and on exit the
        # device manager (stopped first, LIFO) goes quietly before the plugins it watches.
        plugins = _start_device_plugins(args.plugin_config or _example("up-plugins.yaml"), plugin_dir, stack)
        devices = _start_device_manager(plugin_dir, workdir / "state", stack)
        names = [r.config.name for r in plugins.resources]
        if not all(devices.wait_for_resource(name, READY_TIMEOUT_S) for name in names):
            print(
                f"kubenode up: device plugins did not register within {READY_TIMEOUT_S:.0f} s",
                file=sys.stderr,
            )
            return 1
        print(f"kubenode up: device plugins registered in {devices.plugin_dir}")
        print(describe_resources(devices.resources()), flush=True)
        manifests = _copy_manifests(args.manifests, workdir / "manifests")
        running = _start_agent(args, manifests, workdir, devices, stack)
        _show_pods(running)
        if args.once:
            return 0
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        print("kubenode up: running; Ctrl-C to stop", flush=True)
        stop.wait()
    return 0


def _example(name: str) -> str | None:
    """examples/<name> from the current directory or the source checkout, if there is one."""
    for base in (Path.cwd(), Path(__file__).resolve().parents[1]):
        candidate = base / "examples" / name
        if candidate.exists():
            return str(candidate)
    return None


def _copy_manifests(requested: str | None, target: Path) -> Path:
    source = requested or _example("pods")
    target.mkdir(parents=True, exist_ok=True)
    if source is None:
        print("kubenode up: no examples/pods found; add manifests to", target)
        return target
    for path in sorted(Path(source).iterdir()):
        if path.is_file() and not path.name.startswith("."):
            shutil.copy(path, target / path.name)
    return target


def _start_agent(
    args: argparse.Namespace,
    manifests: Path,
    workdir: Path,
    devices: DeviceManager,
    stack: contextlib.ExitStack,
) -> RunningAgent:
    from agent.config import AgentConfig, parse_listen
    from agent.daemon import RunningAgent, build_node_agent
    from agent.httpapi import StatusServer

    config = AgentConfig(
        manifests=manifests,
        state_dir=workdir / "state",
        cgroup_root=args.cgroup_root,
        device_plugin_dir=devices.plugin_dir,
        listen=args.listen,
    )
    config.validate("command line")
    agent = build_node_agent(config, devices)
    host, port = parse_listen(config.listen)
    try:
        server = StatusServer(host, port, agent.status_json)
    except OSError:  # the port is taken (say, by a running `kubenode agent`): any free one will do
        server = StatusServer(host, 0, agent.status_json)
    # The device manager is owned by `up` (stopped by its own step), not by RunningAgent.
    running = RunningAgent(config, agent, None, server)
    stack.callback(running.stop, terminate_pods=True)  # before start: a failed start leaves no cgroups
    running.start()
    return running


def _show_pods(running: RunningAgent) -> None:
    import time

    from agent.statustable import render

    agent = running.agent
    deadline = time.monotonic() + READY_TIMEOUT_S
    settled = ("Running", "Succeeded", "Failed")
    while time.monotonic() < deadline and not all(v.record.phase in settled for v in agent.pods()):
        time.sleep(0.1)
    address = running.server.address if running.server else ""
    print(f"\nkubenode up: node agent on {running.config.manifests} (status: http://{address}/pods)")
    print(render(agent.status_json()))
    print("\ncgroup limits:")
    for view in agent.pods():
        if not view.record.cgroup:
            continue
        limits = agent.limits_of(view.record.uid)
        shown = " ".join(
            f"{key}={limits[key]}"
            for key in (
                "cpu_shares",
                "cpu_weight",
                "cpu_quota",
                "cpu_period",
                "memory_limit",
                "pids_limit",
                "cpuset",
            )
            if key in limits
        )
        print(f"  {view.record.key}: {view.record.cgroup}\n    {shown}")
    print(
        f"\nEdit {running.config.manifests} to add or remove pods; then"
        f" `kubenode agent status --listen {address}`."
    )


def _workdir(requested: str | None, stack: contextlib.ExitStack) -> Path:
    if requested:
        path = Path(requested)
        path.mkdir(parents=True, exist_ok=True)
        return path
    # Short on purpose: unix socket paths are limited to 107 bytes.
    path = Path(tempfile.mkdtemp(prefix="kubenode-up-", dir="/tmp"))
    stack.callback(shutil.rmtree, path, ignore_errors=True)
    return path


def _start_device_manager(plugin_dir: Path, state_dir: Path, stack: contextlib.ExitStack) -> DeviceManager:
    from agent.devicemanager import DeviceManager

    manager = DeviceManager(plugin_dir, state_dir)
    manager.start()
    stack.callback(manager.stop)
    return manager


def _start_device_plugins(
    config_file: str | None, plugin_dir: Path, stack: contextlib.ExitStack
) -> PluginManager:
    from deviceplugin.config import default_config, load_config
    from deviceplugin.manager import PluginManager

    config = load_config(config_file) if config_file else default_config("cpu")
    plugins = PluginManager(config, str(plugin_dir))
    thread = threading.Thread(target=plugins.run, name="device-plugins", daemon=True)
    thread.start()

    def stop() -> None:
        plugins.stop()
        thread.join(timeout=10)

    stack.callback(stop)
    return plugins
