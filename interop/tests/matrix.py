"""The compatibility matrix `make interop` writes into docs/interop.md: each scenario (a test module) against
each real component it ran beside, with the component's version, pass or fail, and the date.

A module names its scenario and components with module-level constants (or is listed in KNOWN):

    SCENARIO = "The agent on the real kube-apiserver"
    COMPONENTS = ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "etcd")

The conftest records every test's outcome (a failure in setup, call or teardown fails it; a skip is shown
as one) and the figures the tests record with `record_property` (names ending `_s` are seconds). At the end
of the session the rows of the scenarios that ran replace theirs in the document, between MATRIX_START and
MATRIX_END; the others are kept (their data is carried in a JSON comment inside the markers), so running one
scenario by hand updates only its row.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.k8s.binaries import ROOT, MissingBinary, binary

DOC = ROOT / "docs" / "interop.md"
MATRIX_START = "<!-- interop-matrix:start (written by make interop: interop/tests/matrix.py) -->"
MATRIX_END = "<!-- interop-matrix:end -->"
_DATA = re.compile(r"<!-- interop-matrix-data: (.*?) -->", re.S)

# Columns, in this order; a scenario's cell is empty where it did not involve the component.
ALL_COMPONENTS = (
    "kube-apiserver",
    "kube-scheduler",
    "kube-controller-manager",
    "etcd",
    "kubelet",
    "containerd",
    "runc",
    "dra-example-kubeletplugin",
)
# Scenarios of modules that do not declare SCENARIO/COMPONENTS themselves.
KNOWN: dict[str, tuple[str, tuple[str, ...]]] = {
    "test_deviceplugin_under_kubelet": (
        "The device plugin under the real kubelet",
        ("kubelet", "containerd", "runc", "kube-apiserver", "kube-scheduler", "etcd"),
    ),
    "test_dra_driver_under_kubelet": (
        "The DRA driver under the real kubelet",
        (
            "kubelet",
            "containerd",
            "runc",
            "kube-apiserver",
            "kube-scheduler",
            "kube-controller-manager",
            "etcd",
        ),
    ),
    "test_agent_on_kube_apiserver": (
        "The agent on the real kube-apiserver",
        ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "etcd"),
    ),
    "test_dra_example_driver_under_agent": (
        "Someone else's driver under our agent",
        ("dra-example-kubeletplugin", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "etcd"),
    ),
}
# Where a binary has no --version, the module version its go.mod pins.
_GO_MODULES = {
    "dra-example-kubeletplugin": ("interop/draexample/go.mod", "sigs.k8s.io/dra-example-driver"),
    "generic-device-plugin": ("interop/gdp/go.mod", "github.com/squat/generic-device-plugin"),
}
_VERSION = re.compile(r"\bv?(\d+\.\d+\.\d+(?:[-+][\w.]+)?)")


@functools.cache
def component_version(name: str) -> str:
    """`v1.37.2` for kube-apiserver, `v3.7.4` for etcd, ...: from `--version`, else the pinned go.mod;
    kubenode's own parts ("kubenode apiserver") have kubenode's version."""
    if name.startswith("kubenode"):
        return kubenode_version()
    try:
        path = binary(name)
    except MissingBinary:
        return "not built"
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=20)
        text = out.stdout + out.stderr if out.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):
        text = ""
    if name in _GO_MODULES or not _VERSION.search(text):
        gomod, module = _GO_MODULES.get(name, ("", ""))
        if gomod:
            match = re.search(rf"^\s*{re.escape(module)} (\S+)", (ROOT / gomod).read_text(), re.M)
            if match:
                return match.group(1)
        return "unknown"
    match = _VERSION.search(text)
    assert match is not None
    return "v" + match.group(1)


def kubenode_version() -> str:
    from kubenode import __version__

    return __version__


@dataclass
class ScenarioResult:
    scenario: str
    components: tuple[str, ...]
    tests: dict[str, str] = field(default_factory=dict)  # test name -> passed | failed | skipped
    figures: dict[str, float] = field(default_factory=dict)

    def record(self, test: str, outcome: str) -> None:
        previous = self.tests.get(test)
        if previous == "failed" or (previous == "skipped" and outcome == "passed"):
            return
        self.tests[test] = outcome

    @property
    def outcome(self) -> str:
        outcomes = set(self.tests.values())
        if not outcomes:
            return "not run"
        if "failed" in outcomes:
            return "fail"
        if "skipped" in outcomes:
            return "skipped"
        return "pass"


def _cell(outcome: str) -> str:
    return {"pass": "pass", "fail": "**FAIL**", "skipped": "skipped", "not run": "not run"}[outcome]


def _figures(figures: Mapping[str, float]) -> str:
    parts = []
    for name, value in sorted(figures.items()):
        label = name.removesuffix("_s").replace("_", " ")
        if name.endswith("_s"):
            parts.append(f"{label} {value:.2f} s" if value < 1 else f"{label} {value:.1f} s")
        else:
            parts.append(f"{label} {value:g}")
    return "; ".join(parts)


def render(rows: Iterable[Mapping[str, Any]], note: str = "") -> str:
    """The matrix: one row per scenario, one column per component (its version in the header)."""
    rows = sorted(rows, key=lambda r: str(r["scenario"]))
    named = [c for r in rows for c in r["components"]]
    used = [c for c in ALL_COMPONENTS if c in named]
    used += sorted({c for c in named if c not in ALL_COMPONENTS})  # a scenario's own, after the usual ones
    versions: dict[str, str] = {}
    for row in rows:
        versions.update(row.get("versions") or {})
    header = ["Scenario", *(f"{c} {versions.get(c, '')}".strip() for c in used), "tests", "date", "figures"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [str(row["scenario"])]
        for component in used:
            cells.append(_cell(row["outcome"]) if component in row["components"] else "")
        cells += [f"{row['passed']}/{row['total']}", str(row["date"]), str(row.get("figures_text", ""))]
        lines.append("| " + " | ".join(cells) + " |")
    kubenode = {str(r.get("kubenode", "")) for r in rows} - {""}
    lines.append("")
    lines.append(f"kubenode {', '.join(sorted(kubenode))} against the components above, on loopback.")
    if note:
        lines.append(f"Last run's {note}.")
    failing = [
        (r["scenario"], t) for r in rows for t, o in sorted((r.get("tests") or {}).items()) if o != "passed"
    ]
    if failing:
        lines.append("")
        lines.append("Not passing: " + "; ".join(f"{s}: `{t}`" for s, t in failing) + ".")
    return "\n".join(lines)


def row_of(result: ScenarioResult, date: str) -> dict[str, Any]:
    return {
        "scenario": result.scenario,
        "components": list(result.components),
        "versions": {c: component_version(c) for c in result.components},
        "kubenode": kubenode_version(),
        "outcome": result.outcome,
        "passed": sum(1 for o in result.tests.values() if o == "passed"),
        "total": len(result.tests),
        "tests": dict(result.tests),
        "date": date,
        "figures_text": _figures(result.figures),
    }


def update_doc(
    results: Iterable[ScenarioResult], doc: Path = DOC, date: str | None = None, note: str = ""
) -> bool:
    """Replace the rows of the scenarios in `results` (keeping the others); False when the document has no
    markers (nothing written)."""
    if not doc.exists():
        return False
    text = doc.read_text()
    start, end = text.find(MATRIX_START), text.find(MATRIX_END)
    if start < 0 or end < start:
        return False
    inside = text[start + len(MATRIX_START) : end]
    found = _DATA.search(inside)
    rows: dict[str, dict[str, Any]] = {}
    if found:
        try:
            rows = {r["scenario"]: r for r in json.loads(found.group(1))}
        except (ValueError, KeyError, TypeError):
            rows = {}
    today = date or dt.date.today().isoformat()
    for result in results:
        if result.tests:
            rows[result.scenario] = row_of(result, today)
    data = json.dumps(sorted(rows.values(), key=lambda r: str(r["scenario"])), sort_keys=True)
    body = f"\n{render(rows.values(), note)}\n\n<!-- interop-matrix-data: {data} -->\n"
    doc.write_text(text[: start + len(MATRIX_START)] + body + text[end:])
    return True
