"""Fixtures for the API server tests: one real `kubenode apiserver` for the package, and clients.

A module whose server needs other flags starts its own; so does one that lists every object of a kind or
names its objects as another module does (`own_api`). The others share one: a server start per module saved.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.apiserver import ApiServerProcess


@pytest.fixture(scope="package")
def api() -> Iterator[ApiServerProcess]:
    with ApiServerProcess() as server:
        yield server


@pytest.fixture(scope="module")
def own_api() -> Iterator[ApiServerProcess]:
    """A server of the module's own, for a module that lists every object of a kind (and expects only its
    own) or names objects as other modules do: such a module overrides `api` with this one."""
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
