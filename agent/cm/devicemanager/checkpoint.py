"""The device manager's own checkpoint: which container holds which devices, which resources were registered.

The file is JSON named `kubenode_device_checkpoint.json` in the manager's state dir (never the kubelet's
`kubelet_internal_checkpoint`). It carries a SHA-256 of its data so a torn or edited file is detected; it is
written atomically and durably (`kubenode.atomicfile`). A file that cannot be used, even one whose checksum
matches but whose data does not decode (an `allocResp` that is not a ContainerAllocateResponse), raises
`CheckpointError`; the manager then moves it aside (`quarantine`) and starts without it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

from kubenode.api.deviceplugin.v1beta1 import api_pb2
from kubenode.atomicfile import write_atomically

CHECKPOINT_NAME = "kubenode_device_checkpoint.json"
FORMAT_VERSION = 1


class CheckpointError(ValueError):
    """The checkpoint file exists but cannot be used; the message names the file and the field."""


@dataclass
class Entry:
    """One container's devices of one resource, with the plugin's answer to Allocate."""

    pod_uid: str
    namespace: str
    pod_name: str
    container: str
    resource: str
    device_ids: list[str]
    numa: dict[str, list[int]]
    response: api_pb2.ContainerAllocateResponse


@dataclass
class Checkpoint:
    entries: list[Entry] = field(default_factory=list)
    registered: dict[str, list[str]] = field(default_factory=dict)


def save(path: Path, checkpoint: Checkpoint) -> None:
    data = {
        "entries": [
            {
                "podUID": e.pod_uid,
                "namespace": e.namespace,
                "podName": e.pod_name,
                "container": e.container,
                "resource": e.resource,
                "deviceIDs": e.device_ids,
                "numa": e.numa,
                "allocResp": base64.b64encode(e.response.SerializeToString()).decode(),
            }
            for e in checkpoint.entries
        ],
        "registeredDevices": checkpoint.registered,
    }
    document = {"version": FORMAT_VERSION, "data": data, "checksum": _checksum(data)}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(document, indent=1, sort_keys=True).encode())


def load(path: Path) -> Checkpoint:
    """Read a checkpoint; a missing file is an empty checkpoint, a bad one raises CheckpointError."""
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        return Checkpoint()
    except (OSError, ValueError) as err:
        raise CheckpointError(f"{path}: unreadable: {err}") from None
    if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
        raise CheckpointError(f"{path}: version: expected {FORMAT_VERSION}")
    data = document.get("data")
    if not isinstance(data, dict) or document.get("checksum") != _checksum(data):
        raise CheckpointError(f"{path}: checksum: does not match the data (torn or edited file)")
    try:
        entries = [_entry(raw) for raw in data["entries"]]
        registered = {str(k): [str(i) for i in v] for k, v in data["registeredDevices"].items()}
    except (KeyError, TypeError, ValueError, AttributeError, DecodeError) as err:
        # The exception's class and message only: they name the field, never echo the file's contents.
        raise CheckpointError(f"{path}: data: malformed ({type(err).__name__}: {str(err)[:200]})") from None
    return Checkpoint(entries, registered)


def quarantine(path: Path) -> Path | None:
    """Move an unusable checkpoint aside (`<name>.bad`) so the next save does not destroy the evidence."""
    target = path.with_name(path.name + ".bad")
    try:
        os.replace(path, target)
    except OSError:
        return None
    return target


def _entry(raw: dict[str, Any]) -> Entry:
    response = api_pb2.ContainerAllocateResponse()
    response.ParseFromString(base64.b64decode(raw["allocResp"], validate=True))
    return Entry(
        pod_uid=str(raw["podUID"]),
        namespace=str(raw["namespace"]),
        pod_name=str(raw["podName"]),
        container=str(raw["container"]),
        resource=str(raw["resource"]),
        device_ids=[str(i) for i in raw["deviceIDs"]],
        numa={str(k): [int(n) for n in v] for k, v in raw["numa"].items()},
        response=response,
    )


def _checksum(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
