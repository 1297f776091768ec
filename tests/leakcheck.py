"""What a test run must not leave on the host: files in its CDI spec dirs, and kubenode/kn- cgroups.

Tests name their own CDI spec dir and a unique cgroup root, and remove both; this catches the ones that
do not. Flow (tests/conftest.py runs it around the whole session):

1. `HostState.take()` at the start: the entries of /etc/cdi and /var/run/cdi (and whether each dir exists),
   and the cgroups named `kubenode*` or `kn-*` at the top of every cgroup v1 hierarchy and the unified one.
2. `HostState.take()` again at the end, after every other fixture's teardown; the paths that are new are
   candidates.
3. Several engineers' runs share this machine, so a new path is only blamed on this run when it is
   attributable to it (`Attribution.owner`): a cgroup whose processes descend from this run's pytest is
   ours, one whose processes descend from another live pytest is theirs; a CDI file naming this checkout
   is ours. A path that says nothing (an empty cgroup, a foreign file) is ours unless another pytest run
   was live at the end, in which case it is listed as unattributed and does not fail the run.
4. Processes are mostly gone by the end, so `Watcher` looks every half second during the run: a new cgroup
   is attributed by the processes in it when first seen with some, and that verdict is kept for step 3.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

HOST_CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PREFIXES = ("kubenode", "kn-")
MAX_LOOKS_SKIPPED = 8


def hierarchies(cgroup_root: Path) -> list[Path]:
    """The unified root itself on a v2-only host, else every mounted hierarchy below it (v1 and unified)."""
    if (cgroup_root / "cgroup.procs").exists():
        return [cgroup_root]
    if not cgroup_root.is_dir():
        return []
    return sorted(d for d in cgroup_root.iterdir() if (d / "cgroup.procs").exists())


@dataclass(frozen=True)
class HostState:
    cdi: frozenset[Path]  # the CDI dirs that exist and every entry in them
    cgroups: frozenset[Path]  # kubenode/kn- cgroups at the top of each hierarchy

    @classmethod
    def take(cls, cdi_dirs: Sequence[Path] = HOST_CDI_DIRS, cgroup_root: Path = CGROUP_ROOT) -> HostState:
        cdi: set[Path] = set()
        for directory in cdi_dirs:
            if directory.is_dir():
                cdi.add(directory)  # a new /var/run/cdi turns the cpu plugin's CDI on by default
                cdi.update(directory.iterdir())
        cgroups = {
            entry
            for hierarchy in hierarchies(cgroup_root)
            for entry in hierarchy.iterdir()
            if entry.name.startswith(CGROUP_PREFIXES) and entry.is_dir()
        }
        return cls(frozenset(cdi), frozenset(cgroups))

    def new_since(self, before: HostState) -> list[Path]:
        return sorted((self.cdi - before.cdi) | (self.cgroups - before.cgroups))


class Attribution:
    """Whose a new path is: this run's pytest (`me`) or another live pytest process."""

    def __init__(self, me: int, checkout: Path, seen: dict[Path, str] | None = None) -> None:
        self.me = me
        self.checkout = str(checkout)
        self.seen = seen or {}  # verdicts from while the run went on (Watcher)
        # Per pid, for this attribution's lifetime (one look): the same pods' processes show in every
        # hierarchy, and siblings share their parents, so each /proc entry is read once, not per cgroup
        # and per ancestor (a look at a 110-pod benchmark's cgroups took a second of CPU every half second).
        self._verdicts: dict[int, str] = {}
        self._parents: dict[int, int | None] = {}

    @functools.cached_property
    def others(self) -> set[int]:
        """The other pytest runs live now; looked up only when needed (it lists every process)."""
        related = {self.me, *(p.pid for p in _ancestors(self.me)), *_descendants(self.me)}
        # `timeout 300 python -m pytest` is an ancestor whose command line names pytest too: not another run.
        return {p.pid for p in _pytest_processes() if p.pid not in related}

    def owner(self, path: Path) -> str:
        """Whose `path` is: "ours", "theirs" or "unknown"."""
        if self.seen.get(path, "unknown") != "unknown":
            return self.seen[path]
        if _is_cgroup(path):
            owners = set()
            for pid in _pids_under(path):
                owners.add(self._owner_of_pid(pid))
                if "ours" in owners:
                    return "ours"
            if "theirs" in owners:
                return "theirs"
        elif path.is_file() and self.checkout in _text(path):
            return "ours"  # a spec whose hook runs this checkout's code
        return "unknown"

    def _owner_of_pid(self, pid: int) -> str:
        if pid not in self._verdicts:
            chain = self._chain(pid)
            if self.me in chain:
                verdict = "ours"
            else:
                verdict = "theirs" if chain and self.others & set(chain) else "unknown"
            self._verdicts[pid] = verdict
        return self._verdicts[pid]

    def _chain(self, pid: int) -> list[int]:
        """`pid` and its ancestors up to init (empty when `pid` is gone)."""
        chain: list[int] = []
        current: int | None = pid
        while current and current not in chain:
            if current not in self._parents:
                self._parents[current] = _parent_pid(current)
            if self._parents[current] is None and not chain:
                return []  # gone before it was looked at: nobody's to tell
            chain.append(current)
            current = self._parents[current]
        return chain


class Watcher:
    """Looks for new kubenode/kn- cgroups every `interval` seconds and attributes each by its processes."""

    def __init__(self, before: HostState, me: int, checkout: Path, cgroup_root: Path = CGROUP_ROOT) -> None:
        self.before = before
        self.me = me
        self.checkout = checkout
        self.cgroup_root = cgroup_root
        self.seen: dict[Path, str] = {}
        # A cgroup with no attributable process yet is looked at again after 1, 2, 4, then every 8 looks,
        # not at every one: a big tree of daemonized processes (a CRI pod's, whose parent is init) is walked
        # whole each time, and most such trees never become attributable.
        self._looks = 0
        self._next_look: dict[Path, tuple[int, int]] = {}  # path -> (due at look, looks skipped last)
        self._interval = 0.5
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="host-leak-watcher", daemon=True)

    def start(self, interval: float = 0.5) -> None:
        self._interval = interval
        self._thread.start()

    def stop(self) -> dict[Path, str]:
        self._stop.set()
        self._thread.join()
        return self.seen

    def look(self) -> None:
        self._looks += 1
        now = HostState.take((), self.cgroup_root).cgroups - self.before.cgroups
        pending = [
            path
            for path in now
            if self.seen.get(path, "unknown") == "unknown"
            and self._next_look.get(path, (0, 0))[0] <= self._looks
        ]
        if not pending:
            return
        attribution = Attribution(self.me, self.checkout)  # the other runs live now
        for path in pending:
            self.seen[path] = attribution.owner(path)
            if self.seen[path] == "unknown":
                skip = min(2 * self._next_look.get(path, (0, 0))[1] or 1, MAX_LOOKS_SKIPPED)
                self._next_look[path] = (self._looks + skip, skip)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.look()
            except OSError:
                continue  # a cgroup removed while read: the next look sees the new state


def leaks(new: Iterable[Path], attribution: Attribution) -> tuple[list[str], list[str]]:
    """(one line per path this run left, one line per new path no run can be told of)."""
    failing: list[str] = []
    unattributed: list[str] = []
    for path in new:
        if not path.exists():
            continue  # removed since the snapshot (another run's cleanup, or a late teardown)
        owner = attribution.owner(path)
        what = "a cgroup" if _is_cgroup(path) else "in a host CDI spec dir"
        if owner == "ours" or (owner == "unknown" and not attribution.others):
            failing.append(f"left behind by this run: {path} ({what})")
        elif owner == "unknown":
            others = ", ".join(str(pid) for pid in sorted(attribution.others))
            unattributed.append(f"new, maybe another run's (pytest {others} live): {path} ({what})")
    return failing, unattributed


def _is_cgroup(path: Path) -> bool:
    return (path / "cgroup.procs").exists()


def _pids_under(cgroup: Path) -> set[int]:
    pids: set[int] = set()
    # os.walk, not rglob: another run's cgroup removed while walked is skipped (rglob raised
    # FileNotFoundError from its scandir and failed this run's teardown).
    for directory, _, files in os.walk(cgroup):
        if "cgroup.procs" not in files:
            continue
        try:
            pids.update(int(line) for line in (Path(directory) / "cgroup.procs").read_text().split())
        except (OSError, ValueError):
            continue  # removed meanwhile
    return pids


def _parent_pid(pid: int) -> int | None:
    try:
        return psutil.Process(pid).ppid()
    except psutil.Error:
        return None


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _ancestors(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).parents()
    except psutil.Error:
        return []


def _descendants(pid: int) -> set[int]:
    try:
        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return set()


def _pytest_processes() -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info.get("cmdline") or []
        # Within the first words: `python -m pytest`, `timeout 300 .venv/bin/python -m pytest`, `pytest`.
        if any("pytest" in os.path.basename(arg) for arg in cmdline[:6]):
            found.append(process)
    return found
