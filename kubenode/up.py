"""`kubenode up`: run the node's parts together on this machine with embedded defaults.

Today: the kubelet-side device manager on a private directory plus the device
plugin (CPU backend by default) registered to it; prints what is advertised and
keeps running until Ctrl-C (or exits at once with --once). Each part is one
`_start_*` step on a shared ExitStack, so adding the node agent is one more step.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent.devicemanager import DeviceManager
    from deviceplugin.manager import PluginManager

READY_TIMEOUT_S = 15.0


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "up", help="run the main job on this machine with embedded defaults"
    )
    parser.add_argument("--once", action="store_true", help="print what is advertised and exit")
    parser.add_argument("--plugin-config", metavar="FILE", help="device plugin config (default: CPU backend)")
    parser.add_argument(
        "--dir", metavar="DIR", help="working directory (default: a private temporary one, removed at exit)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import signal

    from agent.devicemanager.listing import describe_resources

    with contextlib.ExitStack() as stack:
        workdir = _workdir(args.dir, stack)
        plugin_dir = workdir / "device-plugins"
        # Plugins first: they wait for kubelet.sock like on a real node, and on exit the
        # device manager (stopped first, LIFO) goes quietly before the plugins it watches.
        plugins = _start_device_plugins(args.plugin_config, plugin_dir, stack)
        devices = _start_device_manager(plugin_dir, workdir / "state", stack)
        names = [r.config.name for r in plugins.resources]
        if not all(devices.wait_for_resource(name, READY_TIMEOUT_S) for name in names):
            print(f"kubenode up: device plugins did not register within {READY_TIMEOUT_S:.0f} s")
            return 1
        print(f"kubenode up: device plugins registered in {devices.plugin_dir}")
        print(describe_resources(devices.resources()), flush=True)
        if args.once:
            return 0
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        print("kubenode up: running; Ctrl-C to stop", flush=True)
        stop.wait()
    return 0


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
