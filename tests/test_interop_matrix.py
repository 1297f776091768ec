"""docs/interop.md's compatibility matrix (interop/tests/matrix.py), without running any real component:
rows of the scenarios that ran replace theirs, the others stay, and text outside the markers is kept."""

from __future__ import annotations

from pathlib import Path

from interop.tests.matrix import MATRIX_END, MATRIX_START, ScenarioResult, update_doc


def test_rows_merge_by_scenario_and_the_rest_of_the_document_stays(tmp_path: Path) -> None:
    doc = tmp_path / "interop.md"
    doc.write_text(f"# Title\n\nbefore\n\n{MATRIX_START}\nold\n{MATRIX_END}\n\nafter\n")
    first = ScenarioResult("Scenario A", ("kube-apiserver", "etcd"))
    first.record("test_one", "passed")
    first.record("test_two", "failed")
    first.record("test_two", "passed")  # a failure in one phase stays a failure
    first.figures["time_to_running_s"] = 0.25
    second = ScenarioResult("Scenario B", ("kubelet",))
    second.record("test_three", "passed")
    assert update_doc([first, second], doc, date="2026-01-02", note="control plane up in 9.0 s")
    text = doc.read_text()
    assert text.startswith("# Title\n\nbefore\n\n") and text.endswith(f"{MATRIX_END}\n\nafter\n")
    assert "old" not in text
    row_a = next(line for line in text.splitlines() if line.startswith("| Scenario A"))
    assert (
        "**FAIL**" in row_a and "1/2" in row_a and "2026-01-02" in row_a and "time to running 0.25 s" in row_a
    )
    assert "Not passing: Scenario A: `test_two`." in text and "Last run's control plane up in 9.0 s." in text
    # Scenario A alone again, now passing: its row changes, B's stays.
    again = ScenarioResult("Scenario A", ("kube-apiserver", "etcd"))
    again.record("test_one", "passed")
    assert update_doc([again], doc, date="2026-01-03")
    text = doc.read_text()
    row_a = next(line for line in text.splitlines() if line.startswith("| Scenario A"))
    row_b = next(line for line in text.splitlines() if line.startswith("| Scenario B"))
    assert "| pass |" in row_a and "1/1" in row_a and "2026-01-03" in row_a
    assert "2026-01-02" in row_b and "Not passing" not in text


def test_a_component_outside_the_usual_columns_gets_one(tmp_path: Path) -> None:
    doc = tmp_path / "interop.md"
    doc.write_text(f"{MATRIX_START}\n{MATRIX_END}\n")
    result = ScenarioResult("Kube on ours", ("kube-scheduler", "kubenode apiserver"))
    result.record("t", "passed")
    assert update_doc([result], doc, date="2026-01-02")
    header = next(line for line in doc.read_text().splitlines() if line.startswith("| Scenario"))
    assert "kube-scheduler" in header and "kubenode apiserver " in header, header


def test_a_document_without_markers_is_left_alone(tmp_path: Path) -> None:
    doc = tmp_path / "interop.md"
    doc.write_text("no markers\n")
    result = ScenarioResult("S", ())
    result.record("t", "passed")
    assert not update_doc([result], doc)
    assert doc.read_text() == "no markers\n"
