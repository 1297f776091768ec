"""Fixtures: a fake sysfs (8 CPUs, 2 NUMA nodes, SMT pairs) and short socket directories, all removed; a
real `kubenode apiserver` per module and its admin client (`kube`)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.apiserver import ApiServerProcess
from harness.fakesysfs import write_fake_cpus
from kubenode.kubeclient import KubeClient
from kubenode.kubeclient.config import load

# node0: CPUs 0-3, node1: CPUs 4-7; siblings (0,2) (1,3) (4,6) (5,7); socket = NUMA node.
SIBLINGS = {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3", 4: "4,6", 5: "5,7", 6: "4,6", 7: "5,7"}


@pytest.fixture
def fake_sysfs(tmp_path: Path) -> Path:
    return write_fake_cpus(tmp_path / "sys", SIBLINGS, {0: "0-3", 1: "4-7"}, cpus_per_socket=4)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """Unix socket paths must stay under 108 bytes: pytest's tmp_path is too deep."""
    path = Path(tempfile.mkdtemp(prefix="kn-dra-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeClient]:
    with ApiServerProcess() as server:
        client = KubeClient(load(server.kubeconfig))
        yield client
        client.close()
