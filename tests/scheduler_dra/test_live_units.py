"""The live half of DynamicResources without an API server: decoding, routing, the claim writer, the probe."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kubenode.dra.types import ResourceClaim, parse_resource_claim, with_status
from kubenode.kubeclient import RESOURCE_CLAIMS, Conflict, KubeError, NotFound
from kubenode.kubeclient.client import Resource
from scheduler.dra.live import ApiClaimWriter, DraInformers, ParsedClaims, _decoder, serves_dra
from scheduler.dra.plugin import DynamicResources
from tests.scheduler_dra import support


class StubClient:
    def __init__(self, missing: bool = False) -> None:
        self.missing = missing
        self.updates: list[tuple[Resource, dict[str, Any], str]] = []

    def update(self, resource: Resource, body: dict[str, Any], *, subresource: str = "") -> dict[str, Any]:
        self.updates.append((resource, body, subresource))
        return {**body, "metadata": {**body["metadata"], "resourceVersion": "8"}}

    def list(self, resource: Resource, namespace: str | None = None, **_: Any) -> dict[str, Any]:
        if self.missing:
            raise NotFound(404, "NotFound", "the server could not find the requested resource", {})
        return {"items": []}


def test_a_bad_object_decodes_to_its_name_and_is_treated_as_absent(caplog: pytest.LogCaptureFixture) -> None:
    plugin = DynamicResources()
    informers = DraInformers(StubClient(), plugin)  # type: ignore[arg-type]
    good = support.slice_object({"name": "s", "node": "n", "pool": "p", "driver": "d", "devices": ["x"]})
    decode = _decoder("ResourceSlice")
    informers._put(decode(good))
    assert "s" in plugin.state.slices
    bad = {**good, "spec": {**good["spec"], "pool": {"name": "p", "generation": -1}}}
    decoded = decode(bad)
    assert decoded == "s"
    assert "ResourceSlice s ignored" in caplog.text and "spec.pool.generation" in caplog.text
    informers._put(decoded)
    assert "s" not in plugin.state.slices
    claim = support.claim_object({"name": "c", "requests": [{"name": "r", "class": "k"}]})
    informers._put(_decoder("ResourceClaim")(claim))
    assert "default/c" in plugin.state.claims
    informers._remove(_decoder("ResourceClaim")(claim))
    assert plugin.state.claims == {}


def test_the_claim_writer_puts_the_status_with_the_resource_version_read() -> None:
    client = StubClient()
    obj = support.claim_object({"name": "c", "requests": [{"name": "r", "class": "k"}]})
    obj["metadata"]["resourceVersion"] = "7"
    claim = parse_resource_claim(obj)
    status = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}
    written = ApiClaimWriter(client).write_status(claim, status)  # type: ignore[arg-type]
    [(resource, body, subresource)] = client.updates
    assert (resource, subresource) == (RESOURCE_CLAIMS, "status")
    assert body["metadata"]["resourceVersion"] == "7" and body["status"] == status
    assert body["apiVersion"] == "resource.k8s.io/v1" and body["kind"] == "ResourceClaim"
    assert written.raw["metadata"]["resourceVersion"] == "8"
    with pytest.raises(RuntimeError, match="not leading"):
        ApiClaimWriter(client, may_act=lambda: False).write_status(claim, status)  # type: ignore[arg-type]


def test_an_api_without_resource_k8s_io_leaves_the_plugin_idle() -> None:
    assert serves_dra(StubClient(missing=True)) is False  # type: ignore[arg-type]
    assert serves_dra(StubClient()) is True  # type: ignore[arg-type]


def test_a_claim_is_parsed_once_per_version_and_its_spec_once_per_claim() -> None:
    claims = ParsedClaims()
    obj = support.claim_object({"name": "c", "requests": [{"name": "r", "class": "k"}]})
    obj["metadata"].update(resourceVersion="7", uid="u1")
    first = claims.decode(obj)
    assert isinstance(first, ResourceClaim) and claims.decode(dict(obj)) is first
    status = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "pu"}]}
    deleting = {"resourceVersion": "8", "deletionTimestamp": "2026-01-01T00:00:00Z"}
    newer = claims.decode({**obj, "metadata": {**obj["metadata"], **deleting}, "status": status})
    assert isinstance(newer, ResourceClaim)
    assert newer.requests is first.requests  # the spec as parsed before
    assert newer.reserved_for == tuple(status["reservedFor"]) and newer.deleting
    recreated = claims.decode({**obj, "metadata": {**obj["metadata"], "uid": "u2", "resourceVersion": "9"}})
    assert isinstance(recreated, ResourceClaim) and recreated.requests is not first.requests
    bad = {**obj, "metadata": {**obj["metadata"], "uid": "u2", "resourceVersion": "10"}, "status": []}
    assert claims.decode(bad) == "default/c"  # a status that does not parse: logged, as absent


def test_a_status_write_carries_the_deletion_that_began_meanwhile() -> None:
    obj = support.claim_object({"name": "c", "requests": [{"name": "r", "class": "k"}]})
    claim = parse_resource_claim(obj)
    assert not claim.deleting
    written = {**obj, "metadata": {**obj["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    after = with_status(claim, written)
    assert after.deleting and after.requests is claim.requests
    assert not with_status(after, obj).deleting


class AsyncClient(StubClient):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, str, Any]] = []
        self.answers: list[Callable[[dict[str, Any] | None, KubeError | None], None]] = []

    def request_async(
        self,
        method: str,
        path: str,
        done: Callable[[dict[str, Any] | None, KubeError | None], None],
        **kw: Any,
    ) -> None:
        self.sent.append((method, path, kw["body"]))
        self.answers.append(done)


def test_the_async_claim_writer_answers_the_claim_written_and_the_watch_event_reuses_it() -> None:
    client = AsyncClient()
    claims = ParsedClaims()
    writer = ApiClaimWriter(client, claims=claims)  # type: ignore[arg-type]
    obj = support.claim_object({"name": "c", "requests": [{"name": "r", "class": "k"}]})
    obj["metadata"]["resourceVersion"] = "7"
    claim = parse_resource_claim(obj)
    status = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}
    results: list[tuple[ResourceClaim | None, Exception | None]] = []
    writer.write_status_async(claim, status, lambda c, e: results.append((c, e)))
    [(method, path, body)] = client.sent
    assert (method, path) == ("PUT", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c/status")
    assert body["metadata"]["resourceVersion"] == "7" and body["status"] == status
    answer = {**body, "metadata": {**body["metadata"], "resourceVersion": "8"}}
    client.answers[0](answer, None)
    [(written, error)] = results
    assert error is None and written is not None and written.reserved_for == tuple(status["reservedFor"])
    assert claims.decode(answer) is written  # the watch event of that version: no parse
    writer.write_status_async(claim, status, lambda c, e: results.append((c, e)))
    stale = Conflict(409, "Conflict", "the object has been modified", {})
    client.answers[1](None, stale)
    assert results[1] == (None, stale)
    with pytest.raises(RuntimeError, match="not leading"):
        ApiClaimWriter(client, may_act=lambda: False).write_status_async(claim, status, lambda c, e: None)  # type: ignore[arg-type]
