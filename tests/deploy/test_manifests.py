"""Every document of every file under deploy/ deserializes into the official client's models, with no field
the API would not know.

The `kubernetes` client (37.x, pydantic models) does not reject unknown fields on its own: `from_dict`
copies only the fields a model declares, so a misspelt `livenesProbe` would vanish silently, and it also
accepts the Python names (`image_pull_policy`) the API server would refuse. So each document is read
with `from_dict` (types and required fields checked by pydantic), written back with the client's own
serializer (`ApiClient.sanitize_for_serialization`, the JSON it would send), and the two are walked
together: a key in the file that the round trip lost is a field the API does not have.
KubeSchedulerConfiguration is kube-scheduler's component config, not an API object (the client has no
model for it): its top-level keys are checked against kube-scheduler's v1 fields, and
tests/scheduler_extender/test_deploy.py reads the rest with our own parser.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = sorted(ROOT.glob("deploy/**/*.yaml"))
# kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration's fields (k8s.io/kube-scheduler/config/v1).
SCHEDULER_CONFIG_FIELDS = {
    "apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "healthzBindAddress",
    "metricsBindAddress", "enableProfiling", "enableContentionProfiling", "percentageOfNodesToScore",
    "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive",
}  # fmt: skip


def documents() -> Iterator[tuple[str, dict[str, Any]]]:
    for path in MANIFESTS:
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc is not None:
                yield f"{path.relative_to(ROOT)}#{index + 1} ({doc.get('kind')})", doc


def model_for(doc: dict[str, Any]) -> Any:
    """V1Deployment for apps/v1 Deployment, V1ClusterRole for rbac.authorization.k8s.io/v1, ..."""
    version = str(doc.get("apiVersion", "")).rpartition("/")[2]
    name = f"{version[0].upper()}{version[1:]}{doc.get('kind')}"
    model = getattr(kubernetes.client, name, None)
    assert model is not None, f"the client has no model {name} for apiVersion {doc.get('apiVersion')}"
    return model


def serialize(obj: Any) -> Any:
    """The JSON the client would send for `obj` (API field names)."""
    return kubernetes.client.ApiClient().sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]


def unknown_fields(original: Any, round_trip: Any, path: str = "") -> list[str]:
    """Paths of keys in `original` that `round_trip` lost (and list lengths that changed)."""
    found: list[str] = []
    if isinstance(original, dict):
        if not isinstance(round_trip, dict):
            return [f"{path or '.'}: became {type(round_trip).__name__}"]
        for key, value in original.items():
            where = f"{path}.{key}" if path else str(key)
            if key not in round_trip:
                found.append(where)
            else:
                found += unknown_fields(value, round_trip[key], where)
    elif isinstance(original, list):
        if not isinstance(round_trip, list) or len(round_trip) != len(original):
            return [f"{path}: list changed in the round trip"]
        for i, (a, b) in enumerate(zip(original, round_trip, strict=True)):
            found += unknown_fields(a, b, f"{path}[{i}]")
    return found


def test_deploy_has_the_manifests_the_docs_name() -> None:
    names = {str(p.relative_to(ROOT / "deploy")) for p in MANIFESTS}
    assert {"scheduler.yaml", "deviceplugin-daemonset.yaml", "agent-daemonset.yaml"} <= names, names


@pytest.mark.parametrize("where,doc", list(documents()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_document_is_a_valid_api_object_without_unknown_fields(where: str, doc: dict[str, Any]) -> None:
    if doc.get("kind") == "KubeSchedulerConfiguration":
        assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1", where
        assert set(doc) <= SCHEDULER_CONFIG_FIELDS, (
            f"{where}: unknown fields {sorted(set(doc) - SCHEDULER_CONFIG_FIELDS)}"
        )
        return
    model = model_for(doc)
    obj = model.from_dict(doc)  # pydantic: wrong types and missing required fields raise here
    assert obj.metadata is not None and obj.metadata.name, f"{where}: metadata.name is required"
    round_trip = serialize(obj)
    assert not (lost := unknown_fields(doc, round_trip)), f"{where}: fields the API does not know: {lost}"


def test_the_check_catches_a_misspelt_and_a_python_named_field() -> None:
    container = {"name": "c", "image": "i", "livenesProbe": {}, "image_pull_policy": "Always"}
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [container]},
    }
    round_trip = serialize(model_for(doc).from_dict(doc))
    assert unknown_fields(doc, round_trip) == [
        "spec.containers[0].livenesProbe",
        "spec.containers[0].image_pull_policy",
    ]
