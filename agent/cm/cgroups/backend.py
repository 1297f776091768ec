"""What the pod cgroup manager needs from a cgroup version: operations on one cgroup in every hierarchy.

A cgroup is given as its directory names below the mount (`("kn-test-x", "kubepods", "podUID")`);
v1 has one directory per controller hierarchy, v2 a single one.
"""

from __future__ import annotations

from typing import Protocol

from agent.cm.cgroups.api import ResourceConfig

Dirs = tuple[str, ...]


def cgroup_path(dirs: Dirs) -> str:
    """The cgroup's name as the kernel shows it in /proc/<pid>/cgroup."""
    return "/" + "/".join(dirs)


class Hierarchies(Protocol):
    version: int

    def exists(self, dirs: Dirs) -> bool:
        """The cgroup exists in every hierarchy."""

    def exists_anywhere(self, dirs: Dirs) -> bool:
        """The cgroup exists in at least one hierarchy (left over from a partial create)."""

    def create(self, dirs: Dirs) -> bool:
        """mkdir each missing level (new v1 cpusets get the parent's cpus/mems); True if the leaf is new."""

    def validate(self, dirs: Dirs, config: ResourceConfig) -> None:
        """Refuse bad values (CgroupError naming the file) before any write; reads only the parent."""

    def write(self, dirs: Dirs, config: ResourceConfig) -> None:
        """Make the cgroup's files hold `config`, rewriting only what differs."""

    def fit_children_cpusets(self, dirs: Dirs, cpus: str | None, *, before: bool) -> None:
        """Keep the sub-cgroups' cpusets within `cpus` around a write of `dirs`'s (v1 needs it)."""

    def procs_files(self, dirs: Dirs) -> list[str]: ...

    def pids(self, dirs: Dirs) -> set[int]: ...

    def remove(self, dirs: Dirs) -> None:
        """Remove the cgroup and its sub-cgroups in every hierarchy; CgroupError if one is busy."""

    def remove_if_empty(self, dirs: Dirs) -> None: ...

    def children(self, dirs: Dirs) -> set[str]:
        """Names of sub-cgroups, across all hierarchies."""

    def read_limits(self, dirs: Dirs) -> dict[str, str]: ...

    def cpu_usage_ns(self, dirs: Dirs) -> int: ...

    def oom_kills(self, dirs: Dirs) -> int: ...

    def memory_working_set(self, dirs: Dirs) -> int: ...
