"""One running `kubenode up` (no example pods: the tests apply their own) shared by the package."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.support import require_cgroup_v1
from tests.up.support import UpProcess


@pytest.fixture(scope="package")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpProcess]:
    require_cgroup_v1()
    empty = tmp_path_factory.mktemp("no-pods")
    with UpProcess(Path(empty)) as running:
        yield running
