"""Pod sources behind one interface; the first is the manifest directory (the kubelet's static pods).

A source hands the agent complete snapshots (`SourceSnapshot`: every pod it wants now plus
the problems it found); the agent diffs snapshots into adds, updates and removals, as the
kubelet's config merger does. A later API-server source implements the same `PodSource`.

`ManifestSource` reads YAML/JSON files (one or more Pods each, `kind: List` flattened) from
one directory. Changes are noticed through inotify within a fraction of a second, with a
full rescan every `rescan_interval` seconds as a safety net. Each object is handled on its
own: a bad one is reported with its file and field and the others still run. As for the
kubelet's static pods, a pod without a UID gets a deterministic one,
md5(canonical object + "host:<node>" + "file:<path>") in hex, so it survives agent
restarts; `spec.nodeName` is set to the node, and the `kubernetes.io/config.*` annotations
are added. Unlike the kubelet, the pod's name stays as written (no `-<node>` suffix): there
is no API server to mirror it into yet, and the name the user wrote is the one they look for.

Hostile input is contained: a file is read only if it is a regular file inside the
directory (a symlink that leads out of it, to /etc/shadow say, is reported, never read),
at most 3 MiB, with YAML anchors and aliases expanded only within go-yaml's alias budget, as
kubectl does (see `kubenode.model.documents` and `kubenode.yamlload`: an alias bomb is refused);
errors name the file, line, column and field, never the file's text. Any exception while reading one
file becomes that file's error; one while delivering a snapshot is logged and the watch
goes on. A supervisor thread restarts the watcher thread should it die anyway, and
`problems()` reports a dead or stalled watcher to the agent's health check.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from kubenode.dirwatch import DirWatcher
from kubenode.model import Pod, ValidationError, parse_pod
from kubenode.model.documents import load_objects

log = logging.getLogger(__name__)

CONFIG_HASH = "kubernetes.io/config.hash"
CONFIG_SOURCE = "kubernetes.io/config.source"
CONFIG_MIRROR_SOURCE = "file"
SUPERVISE_INTERVAL_S = 1.0
STALL_GRACE_S = 30.0


@dataclass(frozen=True)
class ManifestError:
    source: str  # the file (and document) the problem is in
    field: str
    message: str

    def __str__(self) -> str:
        return ": ".join(part for part in (self.source, self.field, self.message) if part)


@dataclass(frozen=True)
class SourceSnapshot:
    source: str
    pods: tuple[Pod, ...]
    errors: tuple[ManifestError, ...]


class PodSource(Protocol):
    name: str

    def start(self, on_change: Callable[[SourceSnapshot], None]) -> None:
        """Deliver the first snapshot before returning (the source is then ready), later ones later."""

    def stop(self) -> None: ...


def static_pod_uid(obj: Mapping[str, Any], node_name: str, path: str) -> str:
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.md5(usedforsecurity=False)
    digest.update(canonical.encode())
    digest.update(f"host:{node_name}".encode())
    digest.update(f"file:{path}".encode())
    return digest.hexdigest()


@dataclass
class _FileEntry:
    stamp: tuple[int, int, int]
    pods: list[Pod]
    errors: list[ManifestError]


class ManifestSource:
    name = "file"

    def __init__(self, directory: Path, node_name: str, *, rescan_interval: float = 20.0) -> None:
        self.directory = Path(directory).absolute()
        self.node_name = node_name
        self.rescan_interval = rescan_interval
        self._files: dict[str, _FileEntry] = {}
        self._root_real: Path | None = None  # the directory's real path, resolved once per scan
        self._last: SourceSnapshot | None = None
        self._watcher: DirWatcher | None = None
        self._thread: threading.Thread | None = None
        self._supervisor: threading.Thread | None = None
        self._stopping = threading.Event()
        self.restarts = 0
        self.last_beat = time.monotonic()  # the watcher's last loop iteration

    def start(self, on_change: Callable[[SourceSnapshot], None]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._watcher = DirWatcher(self.directory, modify=True)
        on_change(self.scan())
        self._thread = self._start_watcher(on_change)
        self._supervisor = threading.Thread(
            target=self._supervise, args=(on_change,), name="manifests-supervisor", daemon=True
        )
        self._supervisor.start()

    def _start_watcher(self, on_change: Callable[[SourceSnapshot], None]) -> threading.Thread:
        self.last_beat = time.monotonic()
        thread = threading.Thread(target=self._run, args=(on_change,), name="manifests", daemon=True)
        thread.start()
        return thread

    def _supervise(self, on_change: Callable[[SourceSnapshot], None]) -> None:
        """Restart the watcher thread if it ever dies (it should not: it catches everything)."""
        while not self._stopping.wait(SUPERVISE_INTERVAL_S):
            thread = self._thread
            if thread is not None and not thread.is_alive() and not self._stopping.is_set():
                self.restarts += 1
                log.error(
                    "manifest watcher of %s died; restarting it (restart %d)", self.directory, self.restarts
                )
                self._thread = self._start_watcher(on_change)

    def problems(self) -> list[str]:
        """Why this source is not healthy: its watcher thread is dead or has not looped for too long."""
        thread = self._thread
        if thread is None or self._stopping.is_set():
            return []
        if not thread.is_alive():
            return [f"manifest watcher of {self.directory} is not running"]
        stalled = time.monotonic() - self.last_beat
        if stalled > 3 * self.rescan_interval + STALL_GRACE_S:
            return [f"manifest watcher of {self.directory} stalled for {stalled:.0f} s"]
        return []

    def stop(self) -> None:
        self._stopping.set()
        if self._watcher is not None:
            self._watcher.wake()
        if self._supervisor is not None:
            self._supervisor.join(5)
        if self._thread is not None:
            self._thread.join(5)
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None

    def _run(self, on_change: Callable[[SourceSnapshot], None]) -> None:
        assert self._watcher is not None
        while not self._stopping.is_set():
            self.last_beat = time.monotonic()
            events = self._watcher.read(self.rescan_interval)
            if self._stopping.is_set():
                return
            del events  # any event (or the timeout) means: rescan; unchanged files are not re-read
            previous = self._last
            try:
                snapshot = self.scan()
                if snapshot != previous:
                    on_change(snapshot)
            except Exception:  # one bad item must not end the watch: later changes still count
                log.exception("rescanning %s failed; watching on", self.directory)
                self._stopping.wait(1.0)  # no hot loop if it keeps failing

    # ----- reading ---------------------------------------------------------------------------------

    def scan(self) -> SourceSnapshot:
        """Read the directory now (only files whose size, mtime or inode changed are parsed again)."""
        seen: dict[str, _FileEntry] = {}
        self._root_real = None
        for path, linked in self._manifest_files():
            key = str(path)
            try:
                st = path.stat()
            except OSError:  # gone meanwhile, a dangling link, a symlink loop: nothing to read
                continue
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
            entry = self._files.get(key)
            if entry is None or entry.stamp != stamp:
                entry = self._read_file(path, stamp, linked=linked)
            seen[key] = entry
        self._files = seen
        pods: list[Pod] = []
        errors: list[ManifestError] = []
        owners: dict[str, str] = {}
        for key in sorted(seen):
            errors.extend(seen[key].errors)
            for pod in seen[key].pods:
                clash = owners.get(pod.uid) or owners.get(pod.key)
                if clash is not None:
                    errors.append(
                        ManifestError(pod.source, "metadata.name", f"duplicate pod {pod.key}; {clash} has it")
                    )
                    continue
                owners[pod.uid] = owners[pod.key] = pod.source
                pods.append(pod)
        snapshot = SourceSnapshot(self.name, tuple(pods), tuple(errors))
        self._last = snapshot
        return snapshot

    def _manifest_files(self) -> list[tuple[Path, bool]]:
        """(path, is a symlink) of each manifest, by name; the directory entries' types need no stat."""
        try:
            with os.scandir(self.directory) as entries:
                # As the kubelet: hidden files are ignored (editors' swap files too). Symlinks are listed, so
                # that one leading out of the directory is reported rather than silently skipped.
                found = [
                    (entry.name, entry.is_symlink())
                    for entry in entries
                    if not entry.name.startswith(".")
                    and not entry.name.endswith(("~", ".swp"))
                    and (entry.is_symlink() or entry.is_file())
                ]
        except FileNotFoundError:
            return []
        return [(self.directory / name, linked) for name, linked in sorted(found)]

    def _inside(self, path: Path, *, linked: bool) -> Path | None:
        """The real path of a manifest if it lies inside the directory (after symlinks), else None."""
        if self._root_real is None:
            self._root_real = self.directory.resolve()
        root = self._root_real
        # A plain file's real path is the directory's real path and its name: only a link needs resolving.
        real = path.resolve() if linked else root / path.name
        return real if real.is_relative_to(root) and real != root else None

    def _read_file(self, path: Path, stamp: tuple[int, int, int], *, linked: bool) -> _FileEntry:
        entry = _FileEntry(stamp, [], [])
        try:
            real = self._inside(path, linked=linked)
            if real is None:
                raise ValidationError(str(path), "", "symlink leads outside the manifest directory; not read")
            # O_NOFOLLOW on the resolved path: a link swapped in after the check is not followed.
            objects = load_objects(real, follow_symlinks=False)
        except ValidationError as exc:
            entry.errors.append(ManifestError(str(path), exc.field, exc.message))
            log.warning("manifest %s: %s", path, exc.message)
            return entry
        except Exception as exc:  # a bug must cost this file, not the watcher
            log.exception("reading manifest %s", path)
            entry.errors.append(ManifestError(str(path), "", f"internal error: {type(exc).__name__}"))
            return entry
        for where, obj in objects:
            source = f"{path} ({where})" if where else str(path)
            try:
                entry.pods.append(self._static_pod(parse_pod(obj, source), obj, path))
            except ValidationError as exc:
                entry.errors.append(ManifestError(exc.source, exc.field, exc.message))
                log.warning("manifest %s", exc)
            except Exception as exc:
                log.exception("parsing manifest %s", source)
                entry.errors.append(ManifestError(source, "", f"internal error: {type(exc).__name__}"))
        return entry

    def _static_pod(self, pod: Pod, obj: Mapping[str, Any], path: Path) -> Pod:
        uid = pod.uid or static_pod_uid(obj, self.node_name, str(path))
        annotations = {**pod.annotations, CONFIG_HASH: uid, CONFIG_SOURCE: CONFIG_MIRROR_SOURCE}
        return replace(pod, uid=uid, node_name=self.node_name, annotations=annotations)
