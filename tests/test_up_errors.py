"""kubenode/up.py (the embedded-defaults `kubenode up`): one run per cgroup root, and one-line errors.

Driven through kubenode.up's own parser, so these keep testing that module whichever `up` the command
table lists."""

from __future__ import annotations

import argparse
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import kubenode.up as up
from kubenode import runlock
from tests.agent.support import cgroup_dirs, require_cgroup_v1, sweep


@pytest.fixture
def cgroup_root() -> Iterator[str]:
    require_cgroup_v1()
    root = f"/kn-up-{uuid.uuid4().hex[:10]}"
    yield root
    assert not sweep(root), "cgroups leaked"


def _up(capsys: pytest.CaptureFixture[str], *argv: str, rc: int) -> str:
    parser = argparse.ArgumentParser(prog="kubenode")
    up.register(parser.add_subparsers(dest="command"))
    assert up.run(parser.parse_args(["up", *argv])) == rc
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_a_second_kubenode_up_is_refused(cgroup_root: str, capsys: pytest.CaptureFixture[str]) -> None:
    with runlock.hold(runlock.cgroup_root_lock_name(cgroup_root), "kubenode up"):
        err = _up(capsys, "--once", "--cgroup-root", cgroup_root, rc=1)
    assert err.startswith(
        f"kubenode up: another run, pid {os.getpid()} (kubenode up), already uses cgroup root {cgroup_root}"
    )
    assert not cgroup_dirs(cgroup_root)


def test_config_errors_are_one_line(
    cgroup_root: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _up(capsys, "--once", "--cgroup-root", "relative", rc=2)
    assert err == "kubenode up: --cgroup-root: must be an absolute path, got 'relative'"
    missing = tmp_path / "missing.yaml"
    err = _up(capsys, "--once", "--cgroup-root", cgroup_root, "--plugin-config", str(missing), rc=2)
    assert str(missing) in err
    err = _up(capsys, "--once", "--manifests", str(tmp_path / "nope"), rc=2)
    assert err == f"kubenode up: --manifests {tmp_path / 'nope'}: no such directory"
