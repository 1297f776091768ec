"""What a fresh interpreter has imported after running a snippet: the tests that keep a process small
(no kubernetes client in the device plugin, no urllib3 in the client layer, no cluster libraries in the
manifest-only agent) run their snippet through `modules_loaded`, which appends the listing itself."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_MARK = "--- modules loaded ---"


def modules_loaded(code: str, packages: Iterable[str], *, timeout: float = 60) -> tuple[list[str], list[str]]:
    """(the lines `code` printed, the modules it left loaded that are one of `packages` or inside one).

    Runs in a new interpreter at the repository root; a snippet that fails fails the test with its stderr."""
    names = tuple(packages)
    inside = tuple(f"{name}." for name in names)
    listing = (
        "\nimport sys as _sys\n"
        f"print({_MARK!r})\n"
        f"for _m in sorted(m for m in _sys.modules if m in {names!r} or m.startswith({inside!r})):\n"
        "    print(_m)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code + listing], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    cut = lines.index(_MARK)
    return lines[:cut], lines[cut + 1 :]
