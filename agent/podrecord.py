"""What the agent knows about one pod's runtime: container states, pids, devices; saved in the state dir.

The record is the agent's only memory across restarts (the kubelet asks the container
runtime instead): `<state dir>/pods/<uid>.json` is rewritten atomically whenever a
container starts or stops, so a restarted agent can find each container's pid (checked
against its start time and the pod cgroup) and adopt it instead of starting it again.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubenode.model.parse import is_valid_uid

WAITING = "waiting"
RUNNING = "running"
TERMINATED = "terminated"


def rfc3339(wall: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if wall is None else wall))


@dataclass
class ContainerRecord:
    name: str
    init: bool = False
    state: str = WAITING
    reason: str = "ContainerCreating"
    message: str = ""
    exit_code: int | None = None
    started_at: str = ""
    finished_at: str = ""
    restart_count: int = 0
    pid: int | None = None
    create_time: float | None = None
    last_exit_code: int | None = None
    last_reason: str = ""
    log_path: str = ""
    # On the agent's clock (monotonic); not meaningful across restarts, so not saved.
    finished_clock: float | None = field(default=None, compare=False)
    started_clock: float | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("finished_clock")
        data.pop("started_clock")
        return data


@dataclass
class PodRecord:
    uid: str
    namespace: str
    name: str
    qos: str = ""
    phase: str = "Pending"
    reason: str = ""
    message: str = ""
    cgroup: str = ""
    cpuset: str = ""
    start_time: str = ""
    # container -> resource -> device IDs, and container -> "host:container" device/mount specs
    devices: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    device_specs: dict[str, list[str]] = field(default_factory=dict)
    mounts: dict[str, list[str]] = field(default_factory=dict)
    containers: dict[str, ContainerRecord] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def restarts(self) -> int:
        return sum(c.restart_count for c in self.containers.values())

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["containers"] = {name: c.to_json() for name, c in self.containers.items()}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PodRecord:
        containers = {name: ContainerRecord(**c) for name, c in (data.get("containers") or {}).items()}
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "containers"}
        return cls(**fields, containers=containers)


class RecordStore:
    """`<state dir>/pods/<uid>.json`, written atomically (temp file + rename)."""

    def __init__(self, state_dir: Path) -> None:
        self.directory = Path(state_dir) / "pods"

    def save(self, record: PodRecord) -> None:
        if not is_valid_uid(record.uid):
            raise ValueError(f"invalid pod UID {record.uid!r}")
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{record.uid}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record.to_json(), sort_keys=True))
        os.replace(tmp, path)

    def delete(self, uid: str) -> None:
        if is_valid_uid(uid):
            with contextlib.suppress(FileNotFoundError):
                (self.directory / f"{uid}.json").unlink()

    def load_all(self) -> tuple[dict[str, PodRecord], list[str]]:
        """Saved records by UID, and a message for each unreadable file (which is then removed)."""
        records: dict[str, PodRecord] = {}
        problems: list[str] = []
        if not self.directory.is_dir():
            return records, problems
        for path in sorted(self.directory.glob("*.json")):
            try:
                record = PodRecord.from_json(json.loads(path.read_text()))
                if record.uid != path.stem or not is_valid_uid(record.uid):
                    raise ValueError("uid does not match the file name")
                records[record.uid] = record
            except (OSError, ValueError, TypeError) as exc:
                problems.append(f"{path}: {exc}")
                path.unlink(missing_ok=True)
        return records, problems
