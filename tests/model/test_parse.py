from __future__ import annotations

from typing import Any

import pytest

from kubenode.model import QOSClass, ValidationError, parse_node, parse_pod
from kubenode.model.documents import decode_objects
from kubenode.model.requests import pod_requests
from kubenode.model.resources import is_extended_resource_name


def pod(containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": containers, **spec},
    }


def container(
    name: str = "c", requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "command": ["sleep", "1"], "resources": resources}


def test_defaults_as_the_api_server_applies_them() -> None:
    p = parse_pod(pod([container(limits={"cpu": "500m", "memory": "64Mi"})]), "a.yaml")
    assert p.namespace == "default"
    assert p.restart_policy == "Always"
    assert p.termination_grace_period_seconds == 30
    assert p.containers[0].requests == {"cpu": 500, "memory": 64 * 2**20}
    assert p.qos_class is QOSClass.GUARANTEED


def test_qos_classes() -> None:
    assert parse_pod(pod([container()])).qos_class is QOSClass.BEST_EFFORT
    assert parse_pod(pod([container(requests={"cpu": "100m"})])).qos_class is QOSClass.BURSTABLE
    both = {"cpu": "1", "memory": "1Gi"}
    guaranteed = pod([container("a", limits=both), container("b", limits=both)])
    assert parse_pod(guaranteed).qos_class is QOSClass.GUARANTEED
    # An init container without limits makes the pod Burstable.
    guaranteed["spec"]["initContainers"] = [container("i", requests={"cpu": "1"})]
    assert parse_pod(guaranteed).qos_class is QOSClass.BURSTABLE
    # Extended resources do not count for QoS.
    assert parse_pod(pod([container(limits={"kubenode.io/gpu": 1})])).qos_class is QOSClass.BEST_EFFORT


def test_pod_requests_with_init_sidecars_and_overhead() -> None:
    spec = pod(
        [container("app", requests={"cpu": "1", "memory": "1Gi"})],
        initContainers=[
            container("init1", requests={"cpu": "3"}),
            {**container("sidecar", requests={"cpu": "500m"}), "restartPolicy": "Always"},
            container("init2", requests={"cpu": "2", "memory": "2Gi"}),
        ],
        overhead={"cpu": "100m"},
    )
    p = parse_pod(spec)
    # steady = app 1 + sidecar 0.5; init peaks: init1 3, init2 2 + 0.5 -> cpu 3 (+0.1 overhead), memory 2Gi
    assert p.requests == {"cpu": 3100, "memory": 2 * 2**30}


def test_non_zero_defaults_fill_only_missing_cpu_and_memory_requests() -> None:
    p = parse_pod(pod([container("a", requests={"cpu": "0"}), container("b", requests={"memory": "1Gi"})]))
    # a: explicit cpu 0 stays 0, memory missing -> 200Mi; b: cpu missing -> 100m.
    assert pod_requests(p, non_zero=True) == {"cpu": 100, "memory": 200 * 2**20 + 2**30}


def test_toleration_seconds_zero_is_kept_and_a_non_integer_is_rejected() -> None:
    tolerate = {"key": "k", "operator": "Exists", "effect": "NoExecute"}
    spec = pod([container()], tolerations=[{**tolerate, "tolerationSeconds": 0}, tolerate])
    assert [t.toleration_seconds for t in parse_pod(spec).tolerations] == [0, None]
    spec["spec"]["tolerations"][0]["tolerationSeconds"] = "soon"
    with pytest.raises(ValidationError, match=r"tolerations\[0\]\.tolerationSeconds"):
        parse_pod(spec)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: p["metadata"].update(name="Bad_Name"), "metadata.name"),
        (lambda p: p["spec"]["containers"][0]["resources"].update(limits={"cpu": "-1"}), "limits.cpu"),
        (lambda p: p["spec"]["containers"][0]["resources"].update(limits={"cpu": "lots"}), "limits.cpu"),
        (lambda p: p["spec"]["containers"][0]["resources"].update(limts={"cpu": "1"}), "resources.limts"),
        (lambda p: p["spec"]["containers"][0].update(comand=["x"]), "containers[0].comand"),
        (lambda p: p["spec"].update(restartPolicy="Sometimes"), "spec.restartPolicy"),
        (lambda p: p.update(kind="Deployment"), "kind"),
        (lambda p: p["metadata"].update(uid="../../etc"), "metadata.uid"),
        (
            lambda p: p["spec"]["containers"][0]["resources"].update(requests={"kubenode.io/gpu": 1}),
            "limits.kubenode.io/gpu",
        ),
        (
            lambda p: p["spec"]["containers"][0]["resources"].update(requests={"cpu": 2}, limits={"cpu": 1}),
            "requests.cpu",
        ),
        (lambda p: p["spec"].update(containers=[]), "spec.containers"),
        # Extended resources are whole units; hugepages cannot be overcommitted; no request above
        # its limit; pods is a node resource, not a container's (kube's ValidateResourceRequirements).
        (
            lambda p: p["spec"]["containers"][0]["resources"].update(limits={"kubenode.io/gpu": "0.5"}),
            "limits.kubenode.io/gpu",
        ),
        (
            lambda p: p["spec"]["containers"][0]["resources"].update(
                requests={"hugepages-2Mi": "2Mi"}, limits={"hugepages-2Mi": "4Mi"}
            ),
            "requests.hugepages-2Mi",
        ),
        (
            lambda p: p["spec"]["containers"][0]["resources"].update(requests={"hugepages-2Mi": "2Mi"}),
            "limits.hugepages-2Mi",
        ),
        (
            lambda p: p["spec"]["containers"][0]["resources"].update(
                requests={"ephemeral-storage": "2Gi"}, limits={"ephemeral-storage": "1Gi"}
            ),
            "requests.ephemeral-storage",
        ),
        (lambda p: p["spec"]["containers"][0]["resources"].update(limits={"pods": "1"}), "limits.pods"),
    ],
)
def test_bad_pods_name_the_field(mutate: Any, field: str) -> None:
    data = pod([container(limits={"cpu": "1"})])
    mutate(data)
    with pytest.raises(ValidationError) as err:
        parse_pod(data, "pods/web.yaml")
    assert err.value.source == "pods/web.yaml"
    assert field in err.value.field, err.value
    assert str(err.value).startswith("pods/web.yaml: ")


def test_node_allocatable_defaults_to_capacity_and_taints() -> None:
    node = parse_node(
        {
            "kind": "Node",
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "spec": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "kubenode.io/gpu": "4"}},
        }
    )
    assert node.allocatable == {"cpu": 8000, "memory": 32 * 2**30, "pods": 110, "kubenode.io/gpu": 4}
    assert str(node.taints[0]) == "gpu=true:NoSchedule"


def test_documents_flatten_lists_and_multidocs() -> None:
    text = "kind: List\nitems:\n- kind: Node\n  metadata: {name: a}\n---\nkind: Pod\nmetadata: {name: p}\n"
    objs = decode_objects(text, "c.yaml")
    assert [o["kind"] for _, o in objs] == ["Node", "Pod"]
    assert objs[0][0] == "document 1.items[0]"
    with pytest.raises(ValidationError, match=r"c\.yaml: cannot parse"):
        decode_objects("kind: [", "c.yaml")


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("kubenode.io/gpu", True),
        ("nvidia.com/gpu", True),
        ("gpu", False),
        ("kubernetes.io/gpu", False),
        ("requests.example.com/x", False),
        ("example.com/-bad", False),
        ("Example.com/x", False),
    ],
)
def test_extended_resource_names(name: str, ok: bool) -> None:
    assert is_extended_resource_name(name) is ok


def affinity_pod(*requirements: dict[str, Any], key: str = "matchExpressions") -> dict[str, Any]:
    """A pod whose required node affinity has one term with these requirements."""
    term = {key: list(requirements)}
    required = {"nodeSelectorTerms": [term]}
    return pod(
        [container()], affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    )


REQUIRED_TERM = (
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
)


def test_valid_node_selector_requirements_are_read() -> None:
    parsed = parse_pod(
        affinity_pod(
            {"key": "example.com/zone", "operator": "In", "values": ["a", "b"]},
            {"key": "gen", "operator": "Gt", "values": ["-4"]},
            {"key": "gpu", "operator": "DoesNotExist"},
        )
    )
    assert parsed.required_node_affinity is not None
    assert [r.operator for r in parsed.required_node_affinity[0].match_expressions] == [
        "In",
        "Gt",
        "DoesNotExist",
    ]
    by_name = parse_pod(
        affinity_pod({"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}, key="matchFields")
    )
    assert by_name.required_node_affinity is not None
    assert by_name.required_node_affinity[0].match_fields[0].values == ("n1",)


def test_empty_node_selector_terms_are_refused_not_left_unschedulable() -> None:
    data = pod(
        [container()], affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}
    )
    with pytest.raises(ValidationError, match="must have at least one node selector term") as err:
        parse_pod(data, "p.yaml")
    assert err.value.field == REQUIRED_TERM.removesuffix("[0]")
    data["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": []
    }
    with pytest.raises(ValidationError, match="must have at least one node selector term"):
        parse_pod(data, "p.yaml")


@pytest.mark.parametrize(
    ("requirement", "field", "message"),
    [
        ({"key": "zone", "operator": "In"}, "matchExpressions[0].values", "must be specified"),
        (
            {"key": "zone", "operator": "NotIn", "values": []},
            "matchExpressions[0].values",
            "must be specified",
        ),
        ({"key": "zone", "operator": "Exists", "values": ["a"]}, "matchExpressions[0].values", "may not be"),
        (
            {"key": "zone", "operator": "DoesNotExist", "values": ["a"]},
            "matchExpressions[0].values",
            "may not be",
        ),
        ({"key": "gen", "operator": "Gt"}, "matchExpressions[0].values", "single value"),
        (
            {"key": "gen", "operator": "Lt", "values": ["1", "2"]},
            "matchExpressions[0].values",
            "single value",
        ),
        ({"key": "gen", "operator": "Gt", "values": ["four"]}, "matchExpressions[0].values[0]", "integer"),
        ({"key": "gen", "operator": "Lt", "values": ["1.5"]}, "matchExpressions[0].values[0]", "integer"),
        ({"key": "gen", "operator": "Lt", "values": ["5\n"]}, "matchExpressions[0].values[0]", "integer"),
        (
            {"key": "gen", "operator": "Lt", "values": [str(2**63)]},
            "matchExpressions[0].values[0]",
            "integer",
        ),
        (
            {"key": "gen", "operator": "Above", "values": ["1"]},
            "matchExpressions[0].operator",
            "must be one of",
        ),
        ({"key": "bad key", "operator": "Exists"}, "matchExpressions[0].key", "invalid label key"),
        ({"key": "", "operator": "Exists"}, "matchExpressions[0].key", "invalid label key"),
        ({"key": "Bad_Domain/zone", "operator": "Exists"}, "matchExpressions[0].key", "prefix part"),
    ],
)
def test_bad_node_selector_requirements_name_the_field(
    requirement: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message) as err:
        parse_pod(affinity_pod(requirement), "p.yaml")
    assert err.value.field == f"{REQUIRED_TERM}.{field}"


@pytest.mark.parametrize(
    ("requirement", "field", "message"),
    [
        ({"key": "metadata.name", "operator": "Exists"}, "operator", "In or NotIn"),
        ({"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}, "values", "only one value"),
        ({"key": "metadata.name", "operator": "In"}, "values", "only one value"),
        (
            {"key": "metadata.labels", "operator": "In", "values": ["n1"]},
            "key",
            "not a valid field selector key",
        ),
        ({"key": "metadata.name", "operator": "In", "values": ["N_1"]}, "values[0]", "RFC 1123 subdomain"),
    ],
)
def test_bad_node_field_selectors_name_the_field(
    requirement: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message) as err:
        parse_pod(affinity_pod(requirement, key="matchFields"), "p.yaml")
    assert err.value.field == f"{REQUIRED_TERM}.matchFields[0].{field}"


def test_preferred_terms_are_validated_like_required_ones() -> None:
    preferred = [{"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In"}]}}]
    data = pod(
        [container()],
        affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}},
    )
    with pytest.raises(ValidationError) as err:
        parse_pod(data)
    assert err.value.field == (
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
        ".matchExpressions[0].values"
    )


def test_env_key_refs_are_kept_for_the_agent() -> None:
    env = [
        {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
        {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "p", "optional": True}}},
    ]
    parsed = parse_pod(pod([{**container(), "env": env}]), "pods/web.yaml")
    assert [e.key_ref for e in parsed.containers[0].env] == [
        ("configmaps", "cm", "k", False),
        ("secrets", "s", "p", True),
    ]
    missing_key = [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s"}}}]
    with pytest.raises(ValidationError) as err:
        parse_pod(pod([{**container(), "env": missing_key}]), "pods/web.yaml")
    assert err.value.field.endswith("valueFrom.secretKeyRef.key"), err.value
