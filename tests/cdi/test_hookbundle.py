"""`kubenode cdi-hook install DIR` and the commands the spec names: the bundle pins a real process from a root
holding nothing but the bundle (no Python, no libc, no kubenode: what a bare host offers the hook), and
still refuses with its one line; the default command without a bundle (this interpreter, -I -S) pins too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from deviceplugin.hookbundle import install
from deviceplugin.hookcommand import HookCommand, HookCommandError, hook_command, this_interpreter
from tests.cdi.test_hook import bundle_with, make_child, v1_cgroup  # noqa: F401 (fixture)

CHROOT_SCRIPT = """set -e
root=$1; shift
mkdir -p "$root/proc" "$root/sys" "$root/$KN_SHARED"
mount --rbind /proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --bind "$KN_SHARED" "$root/$KN_SHARED"
exec chroot "$root" "$@"
"""


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


def in_bare_root(shared: Path, root: Path, argv: list[str], stdin: str) -> subprocess.CompletedProcess[str]:
    """`argv` chrooted into an empty `root` that has only /proc, /sys and `shared` (at its own path)."""
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", CHROOT_SCRIPT, "sh", str(root), *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KN_SHARED": str(shared)},
    )


def spawn(command: HookCommand, cpus: str) -> list[str]:
    return [command.path, *command.argv(cpus)[1:]]


@pytest.mark.cgroup
def test_the_bundle_pins_from_a_root_with_nothing_else(
    v1_cgroup: str,  # noqa: F811
    sleeper: subprocess.Popen[bytes],
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared"
    command = install(shared / "cdi-hook")
    assert hook_command(str(shared / "cdi-hook")) == command  # what the plugin reads back from hook.json
    directory = make_child(v1_cgroup, "ctr", sleeper.pid)
    oci_bundle = shared / "oci"
    oci_bundle.mkdir()
    state = json.dumps({"pid": sleeper.pid, "bundle": bundle_with(oci_bundle, f"{v1_cgroup}/ctr")})
    root = tmp_path / "root"
    root.mkdir()
    try:
        assert in_bare_root(shared, root, ["/bin/sh", "-c", "true"], "").returncode != 0  # nothing there
        result = in_bare_root(shared, root, spawn(command, "1"), state)
        assert (result.returncode, result.stderr) == (0, "")
        assert (directory / "cpuset.cpus").read_text().strip() == "1"
        assert os.sched_getaffinity(sleeper.pid) == {1}
        (directory / "cpuset.cpus").write_text("0")
        refused = in_bare_root(shared, root, spawn(command, "0-7"), state)
        assert refused.returncode == 1
        assert refused.stderr.startswith("kubenode cdi-hook: CPUs ") and refused.stderr.count("\n") == 1
        missing = shared / "oci-missing"
        missing.mkdir()
        unknown_state = json.dumps({"pid": sleeper.pid, "bundle": bundle_with(missing, "/kn-no-such-cgroup")})
        unknown = in_bare_root(shared, root, spawn(command, "0"), unknown_state)
        assert unknown.returncode == 1
        assert unknown.stderr.startswith("kubenode cdi-hook: unknown cgroup /kn-no-such-cgroup ")
        assert unknown.stderr.count("\n") == 1
    finally:
        (Path("/sys/fs/cgroup/cpuset") / "cgroup.procs").write_text(str(sleeper.pid))
    again = install(shared / "cdi-hook")  # idempotent: an upgrade to the same files rewrites nothing
    assert again == command


@pytest.mark.cgroup
def test_the_default_command_runs_this_interpreter_isolated(
    v1_cgroup: str,  # noqa: F811
    sleeper: subprocess.Popen[bytes],
    tmp_path: Path,
) -> None:
    command = this_interpreter()
    assert command.args[1:3] == ("-I", "-S") and command.path == os.path.realpath(sys.executable)
    directory = make_child(v1_cgroup, "ctr", sleeper.pid)
    state = json.dumps({"pid": sleeper.pid, "bundle": bundle_with(tmp_path, f"{v1_cgroup}/ctr")})
    try:
        result = subprocess.run(spawn(command, "0"), input=state, capture_output=True, text=True, env={})
        assert (result.returncode, result.stderr) == (0, "")
        assert (directory / "cpuset.cpus").read_text().strip() == "0"
    finally:
        (Path("/sys/fs/cgroup/cpuset") / "cgroup.procs").write_text(str(sleeper.pid))


def test_cdi_hook_path_forms(tmp_path: Path) -> None:
    assert hook_command("/usr/local/bin/kubenode") == HookCommand(
        "/usr/local/bin/kubenode", ("kubenode", "cdi-hook")
    )
    with pytest.raises(HookCommandError, match=f"{tmp_path} is not a hook bundle .no hook.json."):
        hook_command(str(tmp_path))
    (tmp_path / "hook.json").write_text(json.dumps({"path": "relative", "args": ["x"]}))
    with pytest.raises(HookCommandError, match="path 'relative' is not an absolute path"):
        hook_command(str(tmp_path))


def test_install_refuses_a_relative_dir() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "cdi-hook", "install", "relative/dir"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert (
        result.stderr
        == "kubenode cdi-hook install: DIR 'relative/dir' must be an absolute path (CDI runs hooks by path)\n"
    )
