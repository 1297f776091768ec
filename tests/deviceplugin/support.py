"""Helpers for the device plugin tests: a deadline wait and a direct gRPC client for a plugin socket."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc

from kubenode.api.deviceplugin.v1beta1 import api_pb2_grpc


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
