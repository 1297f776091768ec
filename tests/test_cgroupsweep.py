"""The test sweep of a cgroup root (kubenode/cgroupsweep.py) on a plain directory tree as the v1 mount."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from kubenode.cgroupsweep import sweep_v1_root


def test_a_cgroup_removed_during_the_sweep_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """runc removes a CRI pod's cgroups while the sweep walks them: reading a dying cgroup's
    cgroup.procs answers ENODEV, and the sweep goes on to remove the rest instead of failing."""
    for pod in ("pod-a", "pod-b"):
        (tmp_path / "memory" / "kn-root" / pod).mkdir(parents=True)
    dying = tmp_path / "memory" / "kn-root" / "pod-a" / "cgroup.procs"
    read_text = Path.read_text

    def reading(path: Path, *args: object, **kwargs: object) -> str:
        if path == dying:
            raise OSError(errno.ENODEV, "No such device", str(path))
        return read_text(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", reading)
    assert sweep_v1_root("/kn-root", mount=tmp_path) == []
    assert not (tmp_path / "memory" / "kn-root").exists()
