"""The kubelet's cgroup arithmetic and ResourceConfigForPod, hand-computed."""

from __future__ import annotations

import pytest

from agent.cm.cgroups.api import ResourceConfig
from agent.cm.cgroups.formulas import (
    milli_cpu_to_quota,
    milli_cpu_to_shares,
    resource_config_for_pod,
    shares_to_weight,
    weight_to_shares,
)
from kubenode.model import QOSClass
from tests.agent_cgroups.support import container, guaranteed, pod


@pytest.mark.parametrize(
    ("milli", "shares", "quota"),
    [(0, 2, 0), (1, 2, 1000), (10, 10, 1000), (100, 102, 10000), (250, 256, 25000), (500, 512, 50000),
     (1000, 1024, 100000), (300000, 262144, 30000000)],
)  # fmt: skip
def test_shares_and_quota(milli: int, shares: int, quota: int) -> None:
    assert milli_cpu_to_shares(milli) == shares
    assert milli_cpu_to_quota(milli) == quota


@pytest.mark.parametrize(("shares", "weight"), [(2, 1), (256, 10), (1024, 39), (2048, 79), (262144, 10000)])
def test_linear_weight_conversion(shares: int, weight: int) -> None:
    assert shares_to_weight(shares) == weight
    assert weight_to_shares(1) == 2
    assert weight_to_shares(10000) == 262144


def test_guaranteed_gets_every_limit() -> None:
    config = resource_config_for_pod(guaranteed(250, 128 << 20), cpuset="1")
    assert config == ResourceConfig(
        cpu_shares=256, cpu_quota=25000, cpu_period=100000, memory_limit=128 << 20, cpuset_cpus="1"
    )


def test_burstable_with_all_limits_gets_quota_and_memory() -> None:
    burstable = pod(
        container(requests={"cpu": 100, "memory": 1 << 20}, limits={"cpu": 500, "memory": 2 << 20})
    )
    assert burstable.qos_class == QOSClass.BURSTABLE
    config = resource_config_for_pod(burstable)
    assert (config.cpu_shares, config.cpu_quota, config.cpu_period, config.memory_limit) == (
        102,
        50000,
        100000,
        2 << 20,
    )


def test_burstable_without_every_limit_gets_no_quota_or_memory() -> None:
    # The second container has no limits: ResourceConfigForPod leaves quota and memory unset.
    burstable = pod(
        container("a", requests={"cpu": 100}, limits={"cpu": 200, "memory": 1 << 20}),
        container("b", requests={"cpu": 150}),
    )
    config = resource_config_for_pod(burstable)
    assert (config.cpu_shares, config.cpu_quota, config.cpu_period, config.memory_limit) == (
        256,
        None,
        None,
        None,
    )


def test_init_container_without_limit_counts() -> None:
    limited = container(requests={"cpu": 100, "memory": 1 << 20}, limits={"cpu": 200, "memory": 1 << 20})
    burstable = pod(limited, init=[container("init", requests={"cpu": 50})])
    assert resource_config_for_pod(burstable).cpu_quota is None


def test_best_effort_gets_min_shares_only() -> None:
    config = resource_config_for_pod(pod(container()), pids_limit=100)
    assert config == ResourceConfig(cpu_shares=2, pids_limit=100)


def test_cpu_cfs_quota_off_means_unlimited() -> None:
    config = resource_config_for_pod(guaranteed(500), enforce_cpu_limits=False)
    assert (config.cpu_shares, config.cpu_quota, config.cpu_period) == (512, None, 100000)
