"""One real containerd per test module (harness/containerd.py): private config, stopped and cleaned after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.containerd import ContainerdProcess

# The API server, agent and kubectl of test_cri_pods.py serve every module here (one set per module).
from tests.cri.test_cri_pods import admin, agent, api, kubectl, logs_dir  # noqa: F401


@pytest.fixture(scope="module")
def containerd() -> Iterator[ContainerdProcess]:
    process = ContainerdProcess()
    try:
        yield process.start()
    finally:
        process.close()
