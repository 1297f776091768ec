"""`kubenode agent` refuses ordinary mistakes in one line (exit 2 for flags and config, 1 at run time),
one agent per cgroup root, and `agent drain` stops and removes what a stopped agent left running."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cli.main import main
from harness.manifests import write_manifest
from kubenode import runlock
from tests.agent.support import Harness, cgroup_dirs, pod_manifest, wait_until


def _alive(pid: int) -> bool:
    """Running, not a zombie (the pods are children of this test process, which reaps nobody)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _one_line_error(capsys: pytest.CaptureFixture[str], *argv: str, rc: int) -> str:
    assert main(list(argv)) == rc
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "cannot read"),
        ("maxPodz: 3\n", "maxPodz: unknown setting"),
        ("maxPods: lots\n", "maxPods: must be an integer, got 'lots'"),
        ("maxPods: 1.5\n", "maxPods: must be an integer, got 1.5"),
        ("maxPods: true\n", "maxPods: must be an integer, got True"),
        ("devicePluginWait: [1]\n", "devicePluginWait: must be a number, got [1]"),
        ("manifests: 5\n", "manifests: must be a path, got 5"),
        ("listen: [1, 2]\n", "listen: must be a string, got [1, 2]"),
    ],
)
def test_config_file_errors_name_the_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, expected: str
) -> None:
    path = tmp_path / "agent.yaml"
    if content is not None:
        path.write_text(content)
    err = _one_line_error(capsys, "agent", "--config", str(path), rc=2)
    assert err.startswith(f"kubenode agent: {path}")
    assert expected in err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--listen", "nope"], "kubenode agent: --listen: must be HOST:PORT, got 'nope'"),
        (["--cgroup-root", "relative"], "kubenode agent: --cgroup-root: must be an absolute path"),
        (["--node-name", "Not_A_Name"], "kubenode agent: --node-name: must be a lowercase"),
        (["--confg", "x.yaml"], "unknown flag --confg; did you mean --config?"),
    ],
)
def test_bad_flags_are_named(capsys: pytest.CaptureFixture[str], flags: list[str], expected: str) -> None:
    assert expected in _one_line_error(capsys, "agent", *flags, rc=2)


def _agent_argv(root: str, tmp_path: Path, *extra: str) -> list[str]:
    (tmp_path / "manifests").mkdir(exist_ok=True)
    return [
        "agent",
        "--manifests",
        str(tmp_path / "manifests"),
        "--state-dir",
        str(tmp_path / "state"),
        "--cgroup-root",
        root,
        "--device-plugin-dir",
        "none",
        *extra,
    ]


def test_port_in_use_is_one_line(
    cgroup_root: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        listen = f"127.0.0.1:{busy.getsockname()[1]}"
        err = _one_line_error(capsys, *_agent_argv(cgroup_root, tmp_path, "--listen", listen), rc=1)
    assert err == (
        f"kubenode agent: --listen {listen}: address already in use (another kubenode agent?);"
        " choose a port with --listen"
    )
    assert not cgroup_dirs(cgroup_root)


def test_a_second_agent_on_one_cgroup_root_is_refused(
    cgroup_root: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with runlock.hold(runlock.cgroup_root_lock_name(cgroup_root), "the first agent"):
        err = _one_line_error(capsys, *_agent_argv(cgroup_root, tmp_path, "--listen", ""), rc=1)
    assert f"another kubenode agent, pid {os.getpid()} (the first agent), already uses cgroup root" in err
    assert cgroup_root in err


def test_not_root_says_root_or_a_delegated_cgroup_is_needed(cgroup_root: str, tmp_path: Path) -> None:
    # uid 65534 with only CAP_DAC_READ_SEARCH: it can read the venv under /root, but write nothing of root's.
    tmp_path.chmod(0o777)
    argv = _agent_argv(cgroup_root, tmp_path, "--listen", "")
    result = subprocess.run(
        [
            *("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"),
            *("--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"),
            *(sys.executable, "-m", "cli.main", *argv),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TMPDIR": str(tmp_path)},  # its fallback lock directory lands here
    )
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"kubenode agent: cgroup {cgroup_root}/"), line
    assert "Permission denied" in line and "run it as root, or give its user a delegated cgroup" in line


def test_drain_stops_pods_and_removes_cgroups_records_and_logs(
    make_harness: Callable[..., Harness],
    manifests: Path,
    cgroup_root: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_manifest(manifests, "a.yaml", pod_manifest("a", "echo hello; sleep 600", grace=1))
    write_manifest(manifests, "b.yaml", pod_manifest("b", grace=1))
    h = make_harness().start()
    pids = [h.main_pid("a"), h.main_pid("b")]
    h.agent.stop()  # as `kubenode agent` does on SIGTERM: the pods keep running
    h.started = False
    state = tmp_path / "state"
    assert (state / "logs").is_dir() and any((state / "pods").iterdir())
    argv = ["agent", "drain", "--state-dir", str(state), "--cgroup-root", cgroup_root]
    assert main(argv) == 0, capsys.readouterr().err
    assert "stopped 2 pod(s)" in capsys.readouterr().out
    wait_until(lambda: not any(_alive(pid) for pid in pids), 10, "the pods' processes to end")
    assert not cgroup_dirs(cgroup_root)
    assert not (state / "logs").exists() and not (state / "pods").exists()


def test_drain_with_the_systemd_driver_needs_the_agents_cgroup(capsys: pytest.CaptureFixture[str]) -> None:
    err = _one_line_error(capsys, "agent", "drain", "--cgroup-driver", "systemd", rc=2)
    assert "give --cgroup-root, the agent's cgroup" in err and "/system.slice/kubenode-agent.service" in err


@pytest.mark.parametrize(
    ("listen", "expected"),
    [
        ("host.invalid:10366", "cannot resolve the host"),
        ("192.0.2.1:10366", "not an address of this machine"),  # TEST-NET-1: never local
    ],
)
def test_a_status_address_that_cannot_be_bound_is_named(
    cgroup_root: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], listen: str, expected: str
) -> None:
    err = _one_line_error(capsys, *_agent_argv(cgroup_root, tmp_path, "--listen", listen), rc=1)
    assert err.startswith(f"kubenode agent: --listen {listen}: {expected}"), err
