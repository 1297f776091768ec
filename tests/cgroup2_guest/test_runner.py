"""The host side of `make test-cgroup2` (tools/cgroup2_guest.py), runnable on this host: a missing
kernel or qemu fails naming the package (never a skip), and what the guest is asked to run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def load_runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cgroup2_guest_runner", REPO / "tools/cgroup2_guest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_missing_packages_fail_naming_them_when_not_root(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = load_runner()
    monkeypatch.setattr(runner, "newest_kernel", lambda: None)
    monkeypatch.setattr(runner.shutil, "which", lambda name: None)
    monkeypatch.setattr(runner.os, "geteuid", lambda: 1000)
    with pytest.raises(SystemExit) as exited:
        runner.ensure_prerequisites()
    assert exited.value.code == 1
    message = capsys.readouterr().err
    assert "linux-image-amd64" in message and "qemu-system-x86" in message


def test_guest_command_runs_the_named_guest_modules_and_records_the_status(tmp_path: Path) -> None:
    runner = load_runner()
    command = runner.guest_command(tmp_path, ["rules", "agent"], "quota")
    assert f"cd {REPO} && " in command
    assert "tests/cgroup2_guest/guest_kernel_rules.py tests/cgroup2_guest/guest_agent_e2e.py" in command
    assert f"KUBENODE_CGROUP2_GUEST_OUT={tmp_path}" in command
    assert "-k quota" in command
    assert command.endswith(f"; echo $? > {tmp_path}/rc")
    assert sys.executable in command


def test_an_unknown_module_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        load_runner().main(["--only", "rules,nope"])
    assert exited.value.code == 2
    assert "--only: unknown ['nope']" in capsys.readouterr().err


def test_bench_mode_runs_each_script_with_the_figures_file_and_keeps_the_first_failure(
    tmp_path: Path,
) -> None:
    runner = load_runner()
    command = runner.bench_command(
        tmp_path, ["benchmarks/agent_bench.py --pods 5", "benchmarks/cgroups_bench.py"]
    )
    assert f"cd {REPO} && rc=0; " in command
    assert f"KUBENODE_BENCH_FIGURES={tmp_path}/figures.jsonl" in command
    assert f"{sys.executable} benchmarks/agent_bench.py --pods 5 ||" in command
    assert command.index("agent_bench.py") < command.index("cgroups_bench.py")
    assert command.endswith(f"; echo $rc > {tmp_path}/rc")


def test_bench_mode_status_is_the_first_failing_scripts(tmp_path: Path) -> None:
    # The same command line, with the interpreter standing in for two scripts that fail and one that passes.
    runner = load_runner()
    command = runner.bench_command(
        tmp_path, ["-c 'raise SystemExit(3)'", "-c pass", "-c 'raise SystemExit(5)'"]
    )
    subprocess.run(["sh", "-c", command], check=True, capture_output=True)
    assert (tmp_path / "rc").read_text().strip() == "3"


def test_the_checkout_is_compiled_here_so_the_emulated_guest_does_not_compile_it() -> None:
    # A guest module: the host's pytest never imports it, so only compile_checkout makes its .pyc.
    compiled = (
        REPO / "tests/cgroup2_guest/__pycache__" / f"guest_kernel_rules.{sys.implementation.cache_tag}.pyc"
    )
    compiled.unlink(missing_ok=True)
    load_runner().compile_checkout()
    assert compiled.exists()


def test_v1_hybrid_bench_remounts_the_hosts_layout_before_any_script_and_fails_if_it_cannot(
    tmp_path: Path,
) -> None:
    runner = load_runner()
    command = runner.bench_command(tmp_path, ["benchmarks/agent_bench.py --pods 5"], v1_hybrid=True)
    remount = command.index("umount /sys/fs/cgroup")
    assert remount < command.index("agent_bench.py")
    for controller in ("cpu", "cpuacct", "cpuset", "memory", "devices", "pids"):
        assert f"mount -t cgroup -o {controller} cgroup /sys/fs/cgroup/{controller}" in command
    assert "mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified" in command
    # A remount that fails writes the status and stops there: no script runs on the wrong hierarchy.
    assert f"echo 1 > {tmp_path}/rc; exit 1" in command[remount : command.index("agent_bench.py")]
    assert "umount" not in runner.bench_command(tmp_path, ["benchmarks/agent_bench.py"])


def test_v1_hybrid_is_only_for_benchmarks(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        load_runner().main(["--v1-hybrid"])
    assert exited.value.code == 2
    assert "--v1-hybrid: only with --bench" in capsys.readouterr().err
