"""kubectl-like conventions of the one `kubenode` command: global flags anywhere, any-case log levels,
`-o` for `--output`, a mistyped flag named as itself, and `--version`."""

from __future__ import annotations

import logging
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import kubenode
from cli.main import hoist_global_flags, main

ROOT = Path(__file__).resolve().parent.parent


def test_global_flags_are_moved_in_front_wherever_they_are() -> None:
    assert hoist_global_flags(["deviceplugin", "--log-level", "debug", "discover"]) == [
        "--log-level",
        "debug",
        "deviceplugin",
        "discover",
    ]
    assert hoist_global_flags(["agent", "--log-level=error"]) == ["--log-level=error", "agent"]
    assert hoist_global_flags(["x", "--", "--log-level", "a"]) == ["x", "--", "--log-level", "a"]


def test_log_level_after_the_subcommand_and_in_lower_case(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = root.level, list(root.handlers)
    try:
        root.handlers.clear()  # basicConfig only configures a root logger without handlers
        assert main(["agent", "status", "--listen", "127.0.0.1:9", "--log-level", "debug"]) == 1
        assert root.level == logging.DEBUG
    finally:
        root.handlers[:] = saved[1]
        root.setLevel(saved[0])
    assert "cannot reach the agent" in capsys.readouterr().err


def test_o_is_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = ROOT / "examples/clusters/gpu-pool.yaml"
    assert main(["scheduler", "simulate", "--cluster", str(cluster), "-o", "json"]) == 0
    assert capsys.readouterr().out.lstrip().startswith("{")


@pytest.mark.parametrize(
    "argv",
    [
        ["agent", "--confg", "/etc/kubenode/agent.yaml"],
        ["deviceplugin", "--confg", "x.yaml", "discover"],
        ["--confg", "x", "agent"],
    ],
)
def test_a_mistyped_flag_is_named(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "unknown flag --confg; did you mean --config?" in err
    assert "invalid choice" not in err


def test_version_matches_the_distribution() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert kubenode.__version__ == version
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == f"kubenode {version}"


def test_building_every_parser_imports_nothing_heavy() -> None:
    # Every command builds all the parsers: `kubenode deviceplugin` and the CDI hook must not pay for
    # the client layer, TLS, HTTP servers or gRPC that other commands import inside their handlers.
    heavy = ("aiohttp", "cryptography", "grpc", "kubernetes", "orjson", "prometheus_client", "urllib3")
    probe = (
        "import sys, cli.main as cli; cli.build_parser(); "
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"imported while building the parsers: {out.stdout.strip()}"
