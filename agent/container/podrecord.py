"""What the agent knows about one pod's runtime: container states, pids, devices; saved in the state dir.

`<state dir>/pods/<uid>.json` keeps what the processes cannot tell: exit codes, restart
counts, reasons, start times. It is not the authority on what runs: like the kubelet, which
asks the container runtime, the agent reads the processes in the pod cgroup on start and on
every sync (see `agent.kuberuntime.runtime`), so a lost or stale record never leads to a second copy.

Writes are atomic: a temporary file in the same directory renamed over the record, so an agent
started after a SIGKILL at any point reads the newest record. They are made durable in rounds: the file
and its directory are fsynced by the process's group committer (agent/container/groupcommit.py) together
with every other record saved meanwhile, not in the pod's sync; `RecordStore.flush` waits for that
(the agent's stop does). A failed write (ENOSPC, EIO) removes its temporary file,
leaves the previous record as it was and raises `RecordWriteError`, which the sync reports
in the pod's status. On load, a record that cannot be used (not JSON, truncated, the wrong
JSON type such as `[]` or `"x"`, fields of the wrong type) is moved aside to
`<uid>.json.bad` with a warning, never a crash; leftover temporary files are removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from agent.container.groupcommit import COMMITTER
from agent.container.resources import ContainerResources
from kubenode.atomicfile import TEMP_PREFIX, write_atomically
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
    # A CRI container's ID as kube shows it (`containerd://<id>`) and its image's ID; "" for processes.
    container_id: str = ""
    image_ref: str = ""
    # On the agent's clock (monotonic); not meaningful across restarts, so not saved.
    finished_clock: float | None = field(default=None, compare=False)
    started_clock: float | None = field(default=None, compare=False)
    # True while the running process is one this agent took over at start rather than started itself: the
    # status manager emits no Created/Started for it. Decided by the runtime, never by comparing clocks.
    adopted: bool = field(default=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        # Every field is a str, int, float or None: no copy needed for json.dumps.
        return {name: getattr(self, name) for name in _CONTAINER_SAVED}


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
    # container -> resource -> device IDs
    devices: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # container -> what its device plugins answered (device specs, mounts, env...), for those that hold
    # devices: saved typed ("resources"); the string lists older agents saved ("device_specs", "mounts") are
    # not read, the pod's next sync fills this from the device manager's checkpoint.
    resources: dict[str, ContainerResources] = field(default_factory=dict)
    containers: dict[str, ContainerRecord] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def restarts(self) -> int:
        return sum(c.restart_count for c in self.containers.values())

    def to_json(self) -> dict[str, Any]:
        """The saved form; it shares the record's lists and dicts, so encode it before the record changes."""
        data = {name: getattr(self, name) for name in _POD_FIELDS}
        data["resources"] = {name: r.to_json() for name, r in self.resources.items()}
        data["containers"] = {name: c.to_json() for name, c in self.containers.items()}
        return data

    @classmethod
    def from_json(cls, data: object) -> PodRecord:
        """A record from its decoded JSON; raises ValueError naming the first field that is unusable."""
        if not isinstance(data, dict):
            raise ValueError(f"must be a JSON object, got {type(data).__name__}")
        raw_containers = data.get("containers") or {}
        if not isinstance(raw_containers, dict):
            raise ValueError("containers: must be an object")
        containers = {}
        for name, c in raw_containers.items():
            if not isinstance(c, dict):
                raise ValueError(f"containers.{name}: must be an object")
            record = ContainerRecord(**_known(ContainerRecord, c, f"containers.{name}"))
            if record.name != name:
                raise ValueError(f"containers.{name}.name: does not match its key")
            containers[name] = record
        raw_resources = data.get("resources") or {}
        if not isinstance(raw_resources, dict):
            raise ValueError("resources: must be an object")
        resources = {}
        for name, r in raw_resources.items():
            try:
                resources[name] = ContainerResources.from_json(r)
            except (AttributeError, TypeError, ValueError) as exc:
                raise ValueError(f"resources.{name}: {exc}") from None
        fields = _known(cls, {k: v for k, v in data.items() if k not in _NESTED}, "")
        return cls(**fields, resources=resources, containers=containers)


# The fields to_json writes (asdict would deep-copy every value first: a third of a save's time).
_CONTAINER_SAVED = tuple(
    f.name for f in fields(ContainerRecord) if f.name not in ("finished_clock", "started_clock", "adopted")
)
_NESTED = ("containers", "resources")  # each saved by its own type's to_json
_POD_FIELDS = tuple(f.name for f in fields(PodRecord) if f.name not in _NESTED)


# Expected JSON types of the saved fields (dataclass annotations are strings under `from __future__`).
_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "bool": (bool,),
    "int": (int,),
    "int | None": (int, type(None)),
    "float | None": (float, int, type(None)),
    "dict[str, dict[str, list[str]]]": (dict,),
}


def _known(cls: type, data: dict[str, Any], where: str) -> dict[str, Any]:
    """The saved fields of `cls` in `data`, each checked against its declared type."""
    result = {}
    for name, f in cls.__dataclass_fields__.items():  # type: ignore[attr-defined]
        if name not in data or name in _NESTED:
            continue
        value = data[name]
        expected = _TYPES.get(str(f.type))
        wrong_bool = isinstance(value, bool) and bool not in (expected or ())
        if expected is not None and (wrong_bool or not isinstance(value, expected)):
            raise ValueError(f"{where + '.' if where else ''}{name}: must be {f.type}")
        result[name] = value
    return result


class RecordWriteError(OSError):
    """A record could not be written; the previous one is unchanged."""


class RecordStore:
    """`<state dir>/pods/<uid>.json`, written atomically (temp file, rename), fsynced by group commit."""

    def __init__(self, state_dir: Path) -> None:
        self.directory = Path(state_dir) / "pods"
        self._directory_ready = False  # made private once; made again only if a write finds it gone
        # What each record's file holds: a save that would write the same bytes again (a resync that changed
        # nothing, every pod once a minute) writes and fsyncs nothing. Locked from the comparison to the
        # write, so that what it says a file holds is what the last write put there.
        self._written: dict[str, tuple[Path, bytes]] = {}
        self._writing = threading.Lock()

    def path(self, uid: str) -> Path:
        if not is_valid_uid(uid):
            raise ValueError(f"invalid pod UID {uid[:128]!r}")
        return self.directory / f"{uid}.json"

    def save(self, record: PodRecord) -> None:
        data = json.dumps(record.to_json(), sort_keys=True).encode()
        with self._writing:
            written = self._written.get(record.uid)
            if written is not None and written[1] == data and os.path.exists(written[0]):
                return
            path = self.path(record.uid)
            try:
                if not self._directory_ready:
                    private_dir(self.directory)
                    self._directory_ready = True
                try:
                    write_atomically(path, data, durable=False)
                except FileNotFoundError:  # the directory was removed behind us: make it again, once
                    private_dir(self.directory)
                    write_atomically(path, data, durable=False)
            except OSError as exc:
                self._written.pop(record.uid, None)
                raise RecordWriteError(
                    exc.errno, f"cannot save the pod record {path}: {exc.strerror or exc}"
                ) from None
            self._written[record.uid] = (path, data)
        COMMITTER.add(path)

    @staticmethod
    def flush(timeout: float | None = None) -> bool:
        """Wait until every record saved before this call is on disk; False if `timeout` passed first."""
        return COMMITTER.flush(timeout)

    def delete(self, uid: str) -> None:
        with self._writing:
            self._written.pop(uid, None)
        if is_valid_uid(uid):
            with contextlib.suppress(FileNotFoundError):
                (self.directory / f"{uid}.json").unlink()

    def load_all(self) -> tuple[dict[str, PodRecord], list[str]]:
        """Saved records by UID, and a message for each unusable file (which is moved aside to `.bad`)."""
        records: dict[str, PodRecord] = {}
        problems: list[str] = []
        private_dir(self.directory.parent)  # the state dir: pod records, logs, device checkpoint
        private_dir(self.directory)
        for leftover in self.directory.glob(f"{TEMP_PREFIX}*"):
            leftover.unlink(missing_ok=True)  # a write interrupted by a crash or a full disk
        for path in sorted(self.directory.glob("*.json")):
            try:
                if path.stat().st_size > MAX_RECORD_BYTES:
                    raise ValueError(f"larger than {MAX_RECORD_BYTES} bytes")
                record = PodRecord.from_json(json.loads(path.read_bytes()))
                if record.uid != path.stem or not is_valid_uid(record.uid):
                    raise ValueError("uid does not match the file name")
                records[record.uid] = record
            except (OSError, ValueError, TypeError) as exc:
                # json's messages give a position, never the file's text.
                problems.append(f"{path}: {exc}; moved to {path.name}.bad")
                with contextlib.suppress(OSError):
                    os.replace(path, path.with_name(path.name + ".bad"))
        return records, problems


def private_dir(path: Path) -> None:
    """Create `path` as 0750, or take group write and all access by others from an existing one."""
    path.mkdir(mode=0o750, parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777
    if mode & ~0o750:
        os.chmod(path, mode & 0o750)


MAX_RECORD_BYTES = 64 * 2**20  # far above any real record (2,000 containers take ~1 MiB)
