"""`kubenode up`'s bad flags: one line naming the flag or file, exit 2, nothing started."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--cgroup-root", "relative"],
            "kubenode up: --cgroup-root: must be an absolute path, got 'relative'",
        ),
        (["--port", "70000"], "kubenode up: --port 70000: must be 0-65535"),
        (["--pods", "/nonexistent/pods"], "kubenode up: --pods /nonexistent/pods: no such file or directory"),
        (
            ["--plugin-config", "/nonexistent.yaml"],
            "kubenode up: --plugin-config /nonexistent.yaml: no such file or directory",
        ),
    ],
)
def test_bad_flags_are_one_line(
    argv: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["up", "--once", "--data-dir", str(tmp_path), *argv]) == 2
    assert capsys.readouterr().err.strip() == expected
    assert not (tmp_path / "up").exists(), "something was started"
