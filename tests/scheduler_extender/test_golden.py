"""Golden extender bodies, in the exact JSON names of k8s.io/kube-scheduler/extender/v1 (types.go).

Those types carry no json tags, so the keys are the Go field names (scheduler fact sheet
§1.14): a real kube-scheduler must be able to talk to our extender, and our scheduler to a
real extender, unchanged. Both directions are checked against the files in golden/:
- what our scheduler sends (filter/prioritize ExtenderArgs with NodeNames or Nodes, and
  ExtenderBindingArgs), recorded by a stub extender;
- what our extender answers (ExtenderFilterResult, HostPriorityList, ExtenderBindingResult)
  to golden requests, through its HTTP handlers over a cache filled in-process.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kubenode.model.parse import parse_node, parse_pod
from scheduler.extender.server import Extender
from scheduler.extender.state import ExtenderState
from scheduler.extender_config import ExtenderConfig, ManagedResource
from scheduler.extenders import HttpExtender
from scheduler.profile import parse_configuration
from scheduler.simulate import ClusterObjects, simulate
from tests.scheduler_extender.support import GPU, StubExtender
from tests.scheduler_live.support import node

GOLDEN = Path(__file__).parent / "golden"

# The types' field names, from kube-scheduler's extender/v1 types.go (and the fact sheet).
EXTENDER_ARGS = {"Pod", "Nodes", "NodeNames"}
FILTER_RESULT = {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
HOST_PRIORITY = {"Host", "Score"}
BINDING_ARGS = {"PodName", "PodNamespace", "PodUID", "Node"}
BINDING_RESULT = {"Error"}


def golden(name: str) -> Any:
    return json.loads((GOLDEN / name).read_text())


POD = golden("pod.json")
NODES = [node("g0", **{GPU: "2"}), node("g1", **{GPU: "0"}), node("tainted", **{GPU: "4"})]
NODES[2]["spec"] = {"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]}


def test_golden_files_use_exactly_the_kube_field_names() -> None:
    for name in ("filter_args_node_names.json", "filter_args_nodes.json"):
        assert set(golden(name)) == EXTENDER_ARGS, name
    for name in ("filter_result_node_names.json", "filter_result_nodes.json"):
        assert set(golden(name)) == FILTER_RESULT, name
    assert all(set(item) == HOST_PRIORITY for item in golden("prioritize_result.json"))
    assert set(golden("bind_args.json")) == BINDING_ARGS
    assert set(golden("bind_result.json")) == BINDING_RESULT
    assert set(golden("bind_result_error.json")) == BINDING_RESULT


# --- the calling side ----------------------------------------------------------------------------
def answer(verb: str, body: Any) -> tuple[int, Any]:
    if verb == "filter":
        names = body["NodeNames"]
        return 200, {"NodeNames": names, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""}
    if verb == "prioritize":
        return 200, [{"Host": name, "Score": 0} for name in body["NodeNames"]]
    return 200, {"Error": ""}


def test_our_scheduler_sends_kube_extender_args_with_node_names() -> None:
    cluster = ClusterObjects(nodes=[parse_node(n) for n in NODES[:2]], pods=[parse_pod(POD)])
    with StubExtender(answer) as stub:
        entry = {"urlPrefix": stub.url, "filterVerb": "filter", "prioritizeVerb": "prioritize",
                 "weight": 1, "nodeCacheCapable": True}  # fmt: skip
        config = parse_configuration({"extenders": [entry]}, "test")
        simulate(cluster, config)
    sent = dict(stub.requests)
    assert sent["filter"] == golden("filter_args_node_names.json")
    assert sent["prioritize"] == golden("filter_args_node_names.json")  # the same ExtenderArgs


def test_our_scheduler_sends_full_nodes_when_not_node_cache_capable() -> None:
    cluster = ClusterObjects(nodes=[parse_node(n) for n in NODES[:2]], pods=[parse_pod(POD)])

    def full(verb: str, body: Any) -> tuple[int, Any]:
        return 200, {"Nodes": body["Nodes"], "NodeNames": None, "FailedNodes": {}, "Error": ""}

    with StubExtender(full) as stub:
        config = parse_configuration({"extenders": [{"urlPrefix": stub.url, "filterVerb": "filter"}]}, "t")
        result = simulate(cluster, config)
    assert dict(stub.requests)["filter"] == golden("filter_args_nodes.json")
    assert result.pods[0].node in ("g0", "g1")


def test_our_scheduler_sends_kube_binding_args() -> None:
    with StubExtender(answer) as stub:
        extender = HttpExtender(ExtenderConfig(stub.url, bind_verb="bind"))
        pod = parse_pod(
            {**POD, "metadata": {**POD["metadata"], "uid": "6c3a1e1e-0000-4000-8000-000000000001"}}
        )
        extender.bind(pod, "g0")
        extender.close()
    assert stub.requests == [("bind", golden("bind_args.json"))]


# --- the serving side ----------------------------------------------------------------------------
def serving_extender() -> Extender:
    state = ExtenderState(parse_configuration({}, "test"))
    for obj in NODES:
        state.node_changed(parse_node(obj))
    # One GPU of g0 is already used by a bound pod.
    running = json.loads(json.dumps(POD))
    running["metadata"] = {"name": "running", "namespace": "default", "uid": "u-running"}
    running["spec"]["nodeName"] = "g0"
    running["spec"]["containers"][0]["resources"] = {"requests": {GPU: "1"}, "limits": {GPU: "1"}}
    state.pod_changed(parse_pod(running))
    return Extender(state, client=None)


def respond(extender: Extender, verb: str, body: Any) -> tuple[int, Any]:
    handler = extender._guarded(getattr(extender, verb))

    class Request:
        async def read(self) -> bytes:
            return body if isinstance(body, bytes) else json.dumps(body).encode()

    response: web.Response = asyncio.run(handler(Request()))  # type: ignore[arg-type]
    assert isinstance(response.body, bytes)
    return response.status, json.loads(response.body)


@pytest.mark.parametrize("style", ["node_names", "nodes"])
def test_our_extender_answers_a_kube_filter_request(style: str) -> None:
    request = golden(f"filter_args_{style}.json")
    request = {**request, "Pod": json.loads(json.dumps(POD))}
    if style == "node_names":
        request["NodeNames"] = ["g0", "g1", "tainted", "gone"]
    else:
        request["Nodes"] = {**request["Nodes"], "items": [*request["Nodes"]["items"], NODES[2]]}
    pod_requests = request["Pod"]["spec"]["containers"][0]["resources"]["requests"]
    request["Pod"]["spec"]["containers"][0]["resources"] = {
        "requests": {**pod_requests, GPU: "1"},
        "limits": {GPU: "1"},
    }
    status, body = respond(serving_extender(), "filter", request)
    assert status == 200
    assert body == golden(f"filter_result_{style}.json")


def test_our_extender_answers_a_kube_prioritize_request() -> None:
    request = golden("filter_args_node_names.json")
    status, body = respond(serving_extender(), "prioritize", request)
    assert status == 200
    assert body == golden("prioritize_result.json")


def test_our_extender_answers_bind_errors_in_an_extender_binding_result() -> None:
    status, body = respond(serving_extender(), "bind", golden("bind_args.json"))
    assert status == 200
    assert body == golden("bind_result_error.json")


@pytest.mark.parametrize(
    ("verb", "body", "error"),
    [
        ("filter", b"{not json", "the request body is not JSON"),
        ("filter", [1, 2], "the request body must be a JSON object, got list"),
        ("filter", {"NodeNames": ["g0"]}, "ExtenderArgs.Pod is missing"),
        ("filter", {"Pod": POD}, "ExtenderArgs needs NodeNames or Nodes"),
        ("prioritize", {"Pod": POD, "NodeNames": "g0"}, "NodeNames must be a list of strings"),
        ("filter", {"Pod": {"spec": 3}, "NodeNames": []}, "ExtenderArgs.Pod"),
        ("bind", {"PodName": "p", "Node": 3}, "ExtenderBindingArgs needs string PodName"),
    ],
)
def test_malformed_requests_get_400_with_a_json_error(verb: str, body: Any, error: str) -> None:
    status, answer_body = respond(serving_extender(), verb, body)
    assert status == 400
    assert set(answer_body) == {"Error"} and error in answer_body["Error"], answer_body


def test_interest_follows_managed_resources_in_requests_or_limits() -> None:
    gpu = ManagedResource(GPU)
    extender = HttpExtender(ExtenderConfig("http://127.0.0.1:1", managed_resources=(gpu,)))
    assert not extender.is_interested(parse_pod(POD))
    limits_only = json.loads(json.dumps(POD))
    limits_only["spec"]["containers"][0]["resources"]["limits"] = {GPU: "1"}
    assert extender.is_interested(parse_pod(limits_only))
    assert HttpExtender(ExtenderConfig("http://127.0.0.1:1")).is_interested(parse_pod(POD))
