"""tools/testrun.py's totals: both runs' closing lines added up into the one plain line CI reads."""

from __future__ import annotations

from pathlib import Path

from tools.testrun import SIDE, counts


def test_a_closing_line_is_read_with_each_of_its_counts() -> None:
    output = (
        "tests/a.py ..F\n=== short test summary info ===\nFAILED x\n"
        "== 1 failed, 2074 passed, 2 errors in 690.28s ==\n"
    )
    assert counts(output) == {"failed": 1, "passed": 2074, "errors": 2}
    assert counts("no closing line at all\n") == {}


def test_the_side_run_takes_whole_packages_that_exist() -> None:
    root = Path(__file__).resolve().parents[1]
    assert SIDE and all((root / path).is_dir() for path in SIDE)
