"""Fixtures: one real `kubenode apiserver` and one real extender process for the module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kubenode.kubeclient import KubeClient
from tests.scheduler_extender.support import ExtenderProcess
from tests.scheduler_live.conftest import server_class
from tests.scheduler_live.support import client_for


@pytest.fixture(scope="module")
def apiserver() -> Iterator[Any]:
    with server_class()() as server:
        yield server


@pytest.fixture(scope="module")
def admin(apiserver: Any) -> Iterator[KubeClient]:
    client = client_for(apiserver.kubeconfig)
    yield client
    client.close()


@pytest.fixture(scope="module")
def extender(apiserver: Any) -> Iterator[ExtenderProcess]:
    process = ExtenderProcess(apiserver.kubeconfig)
    yield process
    assert process.stop() == 0, process.log()
