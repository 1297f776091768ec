"""tools/benchrun.py, the runner `make bench` calls per script: a failing or silent script stops the run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORTS = f"import sys\nsys.path.insert(0, {str(ROOT / 'benchmarks')!r})\nfrom benchstats import report\n"


def run(tmp_path: Path, name: str, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / f"{name}_bench.py"
    script.write_text(body)
    argv = [sys.executable, "tools/benchrun.py", str(tmp_path / "figures.jsonl"), str(script), "--size", "3"]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)


def test_a_script_that_fails_stops_the_run_even_after_some_figures(tmp_path: Path) -> None:
    done = run(tmp_path, "broken", REPORTS + "report('first p50', 1.0, 'ms')\nsys.exit(3)\n")
    assert done.returncode == 1
    assert "broken_bench failed (exit status 3)" in done.stderr


def test_a_script_that_records_no_figure_stops_the_run(tmp_path: Path) -> None:
    done = run(tmp_path, "silent", "print('nothing measured')\n")
    assert done.returncode == 1
    assert "silent_bench exited 0 but recorded no figure" in done.stderr


def test_a_run_records_its_figures_and_its_time_and_figures_renders_both(tmp_path: Path) -> None:
    done = run(tmp_path, "fine", REPORTS + "report('thing p50', 1.5, 'ms', '<= 2 ms')\n")
    assert done.returncode == 0, done.stderr
    assert "=== fine_bench: " in done.stdout and "1 figures" in done.stdout
    lines = [json.loads(line) for line in (tmp_path / "figures.jsonl").read_text().splitlines()]
    assert lines[0]["name"] == "thing p50"
    assert lines[1]["bench"] == "fine_bench" and lines[1]["run"]["args"] == ["--size", "3"]
    target = tmp_path / "figures.md"
    argv = [sys.executable, "tools/figures.py", str(tmp_path / "figures.jsonl"), str(target)]
    subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)
    text = target.read_text()
    assert "| fine_bench | thing p50 | 1.50 ms | <= 2 ms |" in text
    assert "load average" in text and "CPUs" in text and "at the start" in text
    assert "| fine_bench | --size 3 |" in text


def test_figures_names_the_labels_of_the_old_table_that_this_run_lost(tmp_path: Path) -> None:
    recorded = tmp_path / "figures.jsonl"
    recorded.write_text(
        json.dumps({"bench": "agent_bench", "name": "kept", "value": 1, "unit": "s", "goal": ""})
    )
    target = tmp_path / "figures.md"
    rows = [
        "| part | figure | measured | goal |",
        "|---|---|---|---|",
        "| x | kept | 1 s |  |",
        "| x | lost | 2 s |  |",
    ]
    target.write_text("\n".join(rows) + "\n")
    argv = [sys.executable, "tools/figures.py", str(recorded), str(target)]
    done = subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, text=True)
    assert "1 figures of the old" in done.stderr and "  lost" in done.stderr and "kept" not in done.stderr
