"""Fixtures for the API server tests: one real `kubenode apiserver` per test module, and clients."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.apiserver import ApiServerProcess


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServerProcess]:
    with ApiServerProcess() as server:
        yield server


def python_client(kubeconfig: str) -> Any:
    """An ApiClient of the official `kubernetes` package for a kubeconfig (no global state)."""
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)  # type: ignore[no-untyped-call]
    return client.ApiClient(configuration)


@pytest.fixture(scope="module")
def core(api: ApiServerProcess) -> Any:
    from kubernetes import client

    return client.CoreV1Api(python_client(str(api.kubeconfig)))
