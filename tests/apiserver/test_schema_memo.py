"""Shortcuts of the create path that must give what the plain code gives: the body decoder's spec memo
(a spec seen before decodes exactly as a fresh walk does) and the server's uids (version 4 UUIDs)."""

from __future__ import annotations

import copy
import math
from typing import Any

import kubernetes.client
import pytest

from apiserver.registry import schema


def pod(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "creationTimestamp": "2024-01-02T03:04:05.678+01:00"},
        "spec": {"containers": [{"name": "c", "image": "pause", "bogus": 1}], **spec},
    }
    return body


def walked(body: dict[str, Any], model: str = "V1Pod") -> tuple[Any, list[str]]:
    """The plain walk, with no memo."""
    unknown: list[str] = []
    return schema._walk(
        copy.deepcopy(body), (schema.MODEL, getattr(kubernetes.client, model)), "", unknown
    ), unknown


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"nodeName": "n1", "priority": 3, "activeDeadlineSeconds": 1.0},
        {"tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 5}], "hostNetwork": True},
        {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": 1}}}], "extra": {"x": 1}},
    ],
)
def test_a_repeated_spec_decodes_as_a_fresh_walk_and_each_result_is_its_own(spec: dict[str, Any]) -> None:
    first = schema.decode(pod("a", **copy.deepcopy(spec)), "V1Pod")
    second = schema.decode(pod("b", **copy.deepcopy(spec)), "V1Pod")
    assert first == walked(pod("a", **spec)) and second == walked(pod("b", **spec))
    assert first[1] == second[1] and first[1]  # the unknown fields are named for every object
    first[0]["spec"]["containers"][0]["image"] = "changed"
    assert schema.decode(pod("c", **copy.deepcopy(spec)), "V1Pod") == walked(pod("c", **spec))


def test_a_spec_of_the_wrong_type_is_refused_every_time() -> None:
    for name in ("a", "b"):
        with pytest.raises(schema.DecodeError, match="expected number"):
            schema.decode(pod(name, priority="high"), "V1Pod")


def test_values_json_cannot_tell_apart_are_not_memoized() -> None:
    # orjson writes NaN as null: neither may answer for the other (a quantity may be a number).
    def cpu(value: Any) -> Any:
        container = {"name": "c", "image": "i", "resources": {"limits": {"cpu": value}}}
        body = schema.decode(pod("a", containers=[container]), "V1Pod")[0]
        return body["spec"]["containers"][0]["resources"]["limits"]["cpu"]

    for _ in range(2):
        assert math.isnan(cpu(math.nan)) and cpu(None) is None
    assert cpu(2**70) == 2**70  # past what orjson encodes: walked each time


def test_new_uid_is_a_version_4_uuid() -> None:
    import uuid

    from apiserver.registry.base import new_uid

    uids = {new_uid() for _ in range(2000)}
    assert len(uids) == 2000
    for uid in uids:
        parsed = uuid.UUID(uid)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == uid
