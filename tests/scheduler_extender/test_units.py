"""The calling side's semantics with a stub extender and the simulator, and `extenders:` parsing."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from kubenode.model.errors import ValidationError
from kubenode.model.parse import parse_node, parse_pod
from scheduler.extender_config import ExtenderConfig, parse_duration
from scheduler.extenders import ExtenderError, HttpExtender
from scheduler.profile import load_configuration, parse_configuration
from scheduler.simulate import ClusterObjects, simulate
from tests.scheduler_extender.support import GPU, StubExtender, extender_entry, write_profile
from tests.scheduler_live.support import node, pod


def cluster(*pods: dict[str, Any], nodes: int = 2) -> ClusterObjects:
    return ClusterObjects(
        nodes=[parse_node(node(f"n{i}", **{GPU: "1"})) for i in range(nodes)],
        pods=[parse_pod(p) for p in pods],
    )


def gpu_pod(name: str) -> dict[str, Any]:
    return pod(name, extra={GPU: "1"})


def config_for(*extenders: dict[str, Any]) -> Any:
    return parse_configuration({"extenders": list(extenders)}, "profile.yaml")


def passing(verb: str, body: Any) -> tuple[int, Any]:
    names = body["NodeNames"]
    if verb == "filter":
        return 200, {"NodeNames": names, "FailedNodes": {}, "Error": ""}
    return 200, [{"Host": n, "Score": 10 if n == "n1" else 0} for n in names]


def test_prioritize_scores_times_weight_times_ten_decide_the_node() -> None:
    with StubExtender(passing) as stub:
        entry = {"urlPrefix": stub.url, "prioritizeVerb": "prioritize", "weight": 2, "nodeCacheCapable": True}
        result = simulate(cluster(pod("p0")), config_for(entry), seed=1)
    # Both nodes score the same in our plugins; the extender adds 10 x 2 x 10 = 200 to n1.
    assert result.pods[0].node == "n1"


def test_filter_reasons_join_the_fit_error_and_only_interested_pods_are_sent() -> None:
    def reject(verb: str, body: Any) -> tuple[int, Any]:
        names = body["NodeNames"]
        return 200, {"NodeNames": [], "FailedNodes": dict.fromkeys(names, "Insufficient example.com/vram")}

    entry = {"urlPrefix": "", "filterVerb": "filter", "nodeCacheCapable": True,
             "managedResources": [{"name": GPU}]}  # fmt: skip
    with StubExtender(reject) as stub:
        entry["urlPrefix"] = stub.url
        result = simulate(cluster(gpu_pod("gpu"), pod("plain")), config_for(entry))
    placed = {p.pod: p for p in result.pods}
    assert placed["default/plain"].node is not None  # not interested: never sent
    assert placed["default/gpu"].node is None
    assert placed["default/gpu"].message.startswith(
        "0/2 nodes are available: 2 Insufficient example.com/vram."
    )
    assert [body["Pod"]["metadata"]["name"] for _, body in stub.requests] == ["gpu"]


def test_ignored_by_scheduler_resources_are_left_out_of_node_resources_fit() -> None:
    entry = extender_entry("http://127.0.0.1:9", bindVerb=None, filterVerb=None, prioritizeVerb=None)
    config = config_for(entry)
    assert GPU in config.profiles["default-scheduler"].ignored_resources
    # Two one-GPU pods on one one-GPU node: without the extender's filter both fit our plugins.
    result = simulate(cluster(gpu_pod("a"), gpu_pod("b"), nodes=1), config)
    assert [p.node for p in result.pods] == ["n0", "n0"]


def test_http_timeout_applies() -> None:
    release = threading.Event()

    def stalled(verb: str, body: Any) -> tuple[int, Any]:
        release.wait(60)  # answers only once the test lets it: a timeout is the only way out before that
        return passing(verb, body)

    with StubExtender(stalled) as stub:
        extender = HttpExtender(ExtenderConfig(stub.url, filter_verb="filter", http_timeout=0.2))
        try:
            with pytest.raises(ExtenderError, match=r"(?i)timed out") as caught:
                extender.filter(parse_pod(pod("p0")), ["n0"], list)
        finally:
            release.set()
            extender.close()
    assert str(caught.value).startswith(f"extender {stub.url}/filter: ")


@pytest.mark.parametrize(
    ("status", "body", "cause"),
    [
        (500, {"oops": 1}, "HTTP 500"),
        (200, {"NodeNames": [], "Error": "device plugin state unknown"}, "device plugin state unknown"),
        (200, {"NodeNames": ["elsewhere"]}, "claims a filtered node 'elsewhere'"),
        (200, ["not", "a", "result"], "ExtenderFilterResult must be a JSON object"),
    ],
)
def test_extender_errors_fail_the_cycle_unless_ignorable(status: int, body: Any, cause: str) -> None:
    with StubExtender(lambda verb, request: (status, body)) as stub:
        entry = {"urlPrefix": stub.url, "filterVerb": "filter", "nodeCacheCapable": True}
        failed = simulate(cluster(pod("p0")), config_for(entry))
        skipped = simulate(cluster(pod("p0")), config_for({**entry, "ignorable": True}))
    assert failed.pods[0].node is None and cause in failed.pods[0].message, failed.pods[0].message
    assert skipped.pods[0].node is not None


def test_prioritize_errors_are_ignored_even_when_not_ignorable() -> None:
    with StubExtender(lambda verb, request: (503, {})) as stub:
        entry = {"urlPrefix": stub.url, "prioritizeVerb": "prioritize", "weight": 1}
        result = simulate(cluster(pod("p0")), config_for(entry))
    assert result.pods[0].node is not None


def test_the_extenders_section_is_parsed_with_kube_field_names(tmp_path: Path) -> None:
    path = write_profile(
        tmp_path / "p.yaml", extender_entry("https://ext.example:8888/", httpTimeout="1m30s")
    )
    (extender,) = load_configuration(path).extenders
    assert extender.url_prefix == "https://ext.example:8888"
    assert (extender.filter_verb, extender.prioritize_verb, extender.bind_verb) == (
        "filter",
        "prioritize",
        "bind",
    )
    assert extender.http_timeout == 90.0 and extender.weight == 5 and extender.node_cache_capable
    assert extender.ignored_resources == {GPU} and not extender.ignorable


@pytest.mark.parametrize(
    ("entry", "field", "message"),
    [
        ({"filterVerb": "filter"}, "extenders[0].urlPrefix", "must be set"),
        ({"urlPrefix": "ext:80"}, "extenders[0].urlPrefix", "http:// or https://"),
        ({"urlPrefix": "http://e", "prioritizeVerb": "p"}, "extenders[0].weight", "positive"),
        ({"urlPrefix": "http://e", "httpTimeout": "5 seconds"}, "extenders[0].httpTimeout", "duration"),
        ({"urlPrefix": "http://e", "preemptVerb": "preempt"}, "extenders[0].preemptVerb", "not supported"),
        ({"urlPrefix": "http://e", "managedResources": [{"name": "cpu"}]}, "name", "extended resource"),
        ({"urlPrefix": "http://e", "filterverb": "f"}, "extenders[0].filterverb", "unknown"),
        ({"urlPrefix": "http://e", "tlsConfig": {"certFile": "c"}}, "tlsConfig.certFile", "together"),
    ],
)
def test_bad_extender_entries_name_the_file_and_field(
    entry: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        config_for(entry)
    assert caught.value.source == "profile.yaml"
    assert field in caught.value.field and message in caught.value.message, str(caught.value)


def test_only_one_extender_may_bind() -> None:
    with pytest.raises(ValidationError, match="only one extender can implement bind"):
        config_for(
            {"urlPrefix": "http://a", "bindVerb": "bind"}, {"urlPrefix": "http://b", "bindVerb": "bind"}
        )


@pytest.mark.parametrize(
    ("text", "seconds"), [("5s", 5.0), ("300ms", 0.3), ("1m30s", 90.0), ("1.5h", 5400.0), ("0", 0.0)]
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)
    assert parse_duration("5") is None and parse_duration("") is None and parse_duration("-1s") is None


def test_the_extender_sees_nodes_come_and_go_between_identical_requests() -> None:
    from scheduler.extender.state import ExtenderState

    state = ExtenderState(parse_configuration({}, "test"))
    state.node_changed(parse_node(node("a")))
    state.node_changed(parse_node(node("b")))
    probe = parse_pod(pod("p"))
    assert state.filter(probe, ["a", "b"])[0] == ["a", "b"]
    state.node_deleted(parse_node(node("a")))
    state.node_changed(parse_node(node("c")))  # may take a's slot
    passed, _, unresolvable = state.filter(probe, ["a", "b"])
    assert passed == ["b"] and list(unresolvable) == ["a"]
    assert state.filter(probe, ["c", "b"])[0] == ["c", "b"]
