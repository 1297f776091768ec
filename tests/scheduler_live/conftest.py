"""Fixtures: a real `kubenode apiserver` process (harness/apiserver.py) and an admin client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kubenode.kubeclient import KubeClient
from tests.scheduler_live.support import client_for


def server_class() -> Any:
    try:
        from harness.apiserver import ApiServerProcess  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:  # a missing prerequisite fails, never skips
        pytest.fail(f"harness/apiserver.py (ApiServerProcess) is needed: {exc}")
    return ApiServerProcess


@pytest.fixture
def apiserver() -> Iterator[Any]:
    with server_class()() as server:
        yield server


@pytest.fixture
def admin(apiserver: Any) -> Iterator[KubeClient]:
    client = client_for(apiserver.kubeconfig)
    yield client
    client.close()
