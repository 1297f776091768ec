"""Helpers for the device plugin tests: a deadline wait, a direct gRPC client for a plugin socket, and plugin
configs whose cpu resources keep their CDI spec dir in the test's own directory."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import yaml

from kubenode.api.deviceplugin.v1beta1 import api_pb2_grpc

CONFIGS = Path(__file__).parent.parent / "configs"


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0, interval: float = 0.005) -> bool:
    """Poll `predicate` until true or the deadline passes; returns the last result."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


@contextmanager
def plugin_client(socket_path: Path) -> Iterator[Any]:
    """A DevicePlugin stub talking to the plugin's own socket, as the kubelet would."""
    with grpc.insecure_channel(f"unix://{socket_path}") as channel:
        grpc.channel_ready_future(channel).result(timeout=5)
        yield api_pb2_grpc.DevicePluginStub(channel)


def private_cdi(document: dict[str, Any], directory: Path) -> dict[str, Any]:
    """`document` (a plugin config) with `directory`/cdi as the cdiSpecDir of every cpu resource naming none.

    The default, /var/run/cdi, is the host's: a plugin would turn CDI on where it exists and leave its spec
    there for the runtime. The directory is not made, so CDI stays off unless the test turns it on.
    """
    for resource in document.get("resources") or []:
        if resource.get("backend") == "cpu":
            options = resource.setdefault("cpu", {}) or {}
            options.setdefault("cdiSpecDir", str(directory / "cdi"))
            resource["cpu"] = options
    return document


def cpu_config(directory: Path) -> Path:
    """tests/configs/cpu.yaml with its CDI spec dir in `directory`, written there; returns its path."""
    document = private_cdi(yaml.safe_load((CONFIGS / "cpu.yaml").read_text()), directory)
    path = directory / "cpu.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path
