"""Check results and how they are reported: text lines, a JSON document, a JUnit XML file."""

from __future__ import annotations

import enum
import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


class Status(enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    SKIP = "SKIP"


@dataclass(frozen=True)
class CheckResult:
    name: str
    resource: str
    status: Status
    detail: str
    seconds: float


def summary_line(results: Sequence[CheckResult], seconds: float) -> str:
    counts = {s: sum(r.status is s for r in results) for s in Status}
    return (
        f"{counts[Status.PASS]} passed, {counts[Status.FAIL]} failed, {counts[Status.SKIP]} skipped"
        f" in {seconds:.2f} s"
    )


def text_line(result: CheckResult) -> str:
    return f"{result.status.value}  {result.name}  [{result.resource}]  {result.detail}"


def to_json(results: Sequence[CheckResult], seconds: float) -> str:
    document = {
        "checks": [
            {
                "name": r.name,
                "resource": r.resource,
                "status": r.status.value,
                "detail": r.detail,
                "seconds": round(r.seconds, 4),
            }
            for r in results
        ],
        "summary": {
            "passed": sum(r.status is Status.PASS for r in results),
            "failed": sum(r.status is Status.FAIL for r in results),
            "skipped": sum(r.status is Status.SKIP for r in results),
            "seconds": round(seconds, 3),
        },
    }
    return json.dumps(document, indent=2)


def write_junit(path: Path, results: Sequence[CheckResult], seconds: float) -> None:
    suite = ET.Element(
        "testsuite",
        name="kubenode-conformance",
        tests=str(len(results)),
        failures=str(sum(r.status is Status.FAIL for r in results)),
        skipped=str(sum(r.status is Status.SKIP for r in results)),
        time=f"{seconds:.3f}",
    )
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=r.resource, name=r.name, time=f"{r.seconds:.3f}")
        if r.status is Status.FAIL:
            ET.SubElement(case, "failure", message=r.detail).text = r.detail
        elif r.status is Status.SKIP:
            ET.SubElement(case, "skipped", message=r.detail)
        else:
            ET.SubElement(case, "system-out").text = r.detail
    tree = ET.ElementTree(suite)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
