"""The one console script lists every part's subcommand."""

from __future__ import annotations

import subprocess
import sys


def test_help_lists_every_subcommand() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", "--help"], check=True, capture_output=True, text=True
    ).stdout
    for command in ("up", "deviceplugin", "agent", "conformance", "scheduler"):
        assert command in out
