"""Fixtures of the interop suite (`make interop`): kubenode beside the real Kubernetes v1.37 components that
`make k8s` built (harness/k8s/).

- `control_plane`: one `ControlPlane` (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) for
  the whole session; each scenario registers its own node under a unique name and pins its pods there with
  a nodeSelector, so scenarios share the control plane without meeting. A binary that is not built is an
  error of every test that needs it (MissingBinary names `make k8s`), never a skip.
- The results hook: every test's outcome and the figures it records (`record_property("..._s", seconds)`)
  go into docs/interop.md's compatibility matrix at the end of the session (interop/tests/matrix.py).
  KUBENODE_INTEROP_MATRIX=0 leaves the document alone.
- A failing test's report carries the tail of every control-plane component's log.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.k8s.controlplane import ControlPlane
from interop.tests.matrix import KNOWN, ScenarioResult, update_doc

_RESULTS: dict[str, ScenarioResult] = {}
_PLANES: list[ControlPlane] = []
_STARTS: list[dict[str, float]] = []  # each control plane's start figures (ControlPlane.start_seconds)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    with ControlPlane() as plane:
        _PLANES.append(plane)
        _STARTS.append(dict(plane.start_seconds))
        try:
            yield plane
        finally:
            _PLANES.remove(plane)


def _scenario(item: pytest.Item) -> ScenarioResult:
    module = getattr(item, "module", None)
    stem = Path(str(item.fspath)).stem
    title, components = KNOWN.get(stem, (stem, ()))
    title = getattr(module, "SCENARIO", title)
    components = tuple(getattr(module, "COMPONENTS", components))
    if title not in _RESULTS:
        _RESULTS[title] = ScenarioResult(title, components)
    return _RESULTS[title]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    result = _scenario(item)
    name = item.name
    if report.failed:
        result.record(name, "failed")
        plane = item.funcargs.get("control_plane") if hasattr(item, "funcargs") else None
        plane = plane or (_PLANES[0] if _PLANES else None)
        if isinstance(plane, ControlPlane):
            report.sections.append(("control plane logs", plane.all_logs(40)))
    elif report.skipped:
        result.record(name, "skipped")
    elif report.when == "call":
        result.record(name, "passed")
    if report.when == "call":
        for key, value in report.user_properties:
            if isinstance(value, int | float):
                result.figures[key] = float(value)


def _start_line() -> str:
    if not _STARTS:
        return ""
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in _STARTS[0].items() if k != "total")
    return f"control plane (v1.37.2) up in {_STARTS[0]['total']:.1f} s: {parts}"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _STARTS:
        terminalreporter.write_line(f"interop: {_start_line()}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("KUBENODE_INTEROP_MATRIX", "1") == "0" or not _RESULTS:
        return
    if update_doc(_RESULTS.values(), note=_start_line()):
        print("\ninterop: matrix written to docs/interop.md", file=sys.stderr)
