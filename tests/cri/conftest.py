"""One real containerd per test module (harness/containerd.py): private config, stopped and cleaned after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.containerd import ContainerdProcess


@pytest.fixture(scope="module")
def containerd() -> Iterator[ContainerdProcess]:
    process = ContainerdProcess()
    try:
        yield process.start()
    finally:
        process.close()
