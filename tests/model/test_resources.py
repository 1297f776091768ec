"""Name rules of kubenode.model.resources, as Kubernetes' validation has them."""

from __future__ import annotations

import pytest

from kubenode.model.resources import extended_resource_name_problem, is_dns1123_subdomain


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("example.com", True),
        ("a" * 64 + ".example.com", True),  # no per-label limit in IsDNS1123Subdomain
        ("a" * 253, True),
        ("a" * 254, False),
        ("", False),
        ("Example.com", False),
        ("example..com", False),
        ("-example.com", False),
        ("example.com\n", False),
    ],
)
def test_dns1123_subdomain(value: str, ok: bool) -> None:
    assert is_dns1123_subdomain(value) is ok


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("gpu", "must have a domain prefix, e.g. example.com/gpu"),
        ("kubernetes.io/gpu", "is in the reserved kubernetes.io namespace"),
        ("requests.example.com/gpu", "must not start with 'requests.'"),
        ("example.com/" + "a" * 64, "name part must be no more than 63 characters"),
        ("example.com/a/b", "prefix part must be a lowercase RFC 1123 subdomain"),
        # 'requests.' counts towards the prefix's 253 characters.
        ("a" * 245 + "/gpu", "prefix part must be a lowercase RFC 1123 subdomain"),
    ],
)
def test_extended_resource_name_problem_gives_the_reason(name: str, reason: str) -> None:
    problem = extended_resource_name_problem(name)
    assert problem is not None and reason in problem


def test_extended_resource_names_accepted() -> None:
    for name in ("nvidia.com/gpu", "kubenode.io/cpu", "a" * 70 + ".example.com/gpu", "a" * 244 + "/gpu"):
        assert extended_resource_name_problem(name) is None, name
