"""The files of config volumes and the env from ConfigMaps/Secrets, with the kubelet's messages; the model's
reading of volumes, volumeMounts and envFrom."""

from __future__ import annotations

from typing import Any

import pytest

from agent.container.downwardapi import ContainerConfigError, HostInfo
from agent.kuberuntime.envvars import container_env
from agent.util.configobjects import CachedConfigObjects, ConfigLookupError, decode_object
from agent.volumemanager.projection import ProjectionError, volume_payload
from kubenode.model import Pod, ValidationError, parse_pod
from tests.volumes.support import FakeObjects

HOST = HostInfo("node-a")


def _pod(spec: dict[str, Any], labels: dict[str, str] | None = None) -> Pod:
    container = {"name": "main", "command": ["true"], **spec.pop("container", {})}
    return parse_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "uid": "u1", "labels": labels or {}},
            "spec": {"containers": [container], **spec},
        }
    )


def _store() -> FakeObjects:
    objects = FakeObjects()
    objects.configmap("app", {"a": "1", "b": "2"})
    objects.secret("creds", {"password": b"\x00bin"})
    return objects


def test_config_map_items_modes_and_optional() -> None:
    pod = _pod(
        {
            "volumes": [
                {"name": "all", "configMap": {"name": "app", "defaultMode": 0o600}},
                {
                    "name": "some",
                    "configMap": {"name": "app", "items": [{"key": "b", "path": "x/b.txt", "mode": 0o400}]},
                },
                {"name": "maybe", "configMap": {"name": "absent", "optional": True}},
                {"name": "gone", "configMap": {"name": "absent"}},
                {"name": "nokey", "configMap": {"name": "app", "items": [{"key": "zz", "path": "z"}]}},
                {
                    "name": "nokey-ok",
                    "secret": {
                        "secretName": "creds",
                        "optional": True,
                        "items": [{"key": "zz", "path": "z"}],
                    },
                },
            ]
        }
    )
    objects = _store()
    volumes = {v.name: v for v in pod.volumes}
    payload = volume_payload(pod, volumes["all"], objects, HOST)
    assert {k: (v.data, oct(v.mode)) for k, v in payload.items()} == {
        "a": (b"1", "0o600"),
        "b": (b"2", "0o600"),
    }
    payload = volume_payload(pod, volumes["some"], objects, HOST)
    assert {k: (v.data, oct(v.mode)) for k, v in payload.items()} == {"x/b.txt": (b"2", "0o400")}
    assert volume_payload(pod, volumes["maybe"], objects, HOST) == {}
    assert volume_payload(pod, volumes["nokey-ok"], objects, HOST) == {}
    with pytest.raises(ProjectionError, match=r'^configmap "absent" not found$'):
        volume_payload(pod, volumes["gone"], objects, HOST)
    with pytest.raises(ProjectionError, match=r"^configmap references non-existent config key: zz$"):
        volume_payload(pod, volumes["nokey"], objects, HOST)


def test_projected_and_downward_api() -> None:
    pod = _pod(
        {
            "volumes": [
                {
                    "name": "both",
                    "projected": {
                        "defaultMode": 0o440,
                        "sources": [
                            {"configMap": {"name": "app", "items": [{"key": "a", "path": "a"}]}},
                            {"secret": {"name": "creds"}},
                            {
                                "downwardAPI": {
                                    "items": [
                                        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}
                                    ]
                                }
                            },
                        ],
                    },
                }
            ]
        },
        labels={"b": 'say "hi"', "a": "x"},
    )
    payload = volume_payload(pod, pod.volumes[0], _store(), HOST)
    assert payload["a"].data == b"1" and payload["password"].data == b"\x00bin"
    assert payload["labels"].data == b'a="x"\nb="say \\"hi\\""'
    assert {v.mode for v in payload.values()} == {0o440}


def test_env_from_config_maps_and_secrets() -> None:
    pod = _pod(
        {
            "container": {
                "envFrom": [
                    {"prefix": "CM_", "configMapRef": {"name": "app"}},
                    {"secretRef": {"name": "absent", "optional": True}},
                ],
                "env": [
                    {"name": "CM_a", "value": "overridden"},
                    {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                    {
                        "name": "OPT",
                        "valueFrom": {"configMapKeyRef": {"name": "app", "key": "zz", "optional": True}},
                    },
                ],
            }
        }
    )
    env = container_env(pod, pod.containers[0], HOST, objects=_store())
    assert env["CM_a"] == "overridden" and env["CM_b"] == "2" and env["PW"] == "\x00bin"
    assert "OPT" not in env


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ({"configMapKeyRef": {"name": "absent", "key": "a"}}, 'configmap "absent" not found'),
        ({"configMapKeyRef": {"name": "app", "key": "zz"}}, "couldn't find key zz in ConfigMap default/app"),
        ({"secretKeyRef": {"name": "creds", "key": "zz"}}, "couldn't find key zz in Secret default/creds"),
        ({"secretKeyRef": {"name": "absent", "key": "a"}}, 'secret "absent" not found'),
    ],
)
def test_a_missing_object_or_key_is_a_config_error(ref: dict[str, Any], message: str) -> None:
    pod = _pod({"container": {"env": [{"name": "X", "valueFrom": ref}]}})
    with pytest.raises(ContainerConfigError) as caught:
        container_env(pod, pod.containers[0], HOST, objects=_store())
    assert str(caught.value) == message


def test_without_a_cluster_a_reference_says_so() -> None:
    pod = _pod({"container": {"envFrom": [{"configMapRef": {"name": "app"}}]}})
    with pytest.raises(ContainerConfigError, match="no API server"):
        container_env(pod, pod.containers[0], HOST)


def test_the_cache_reads_an_object_once_per_ttl() -> None:
    now = [0.0]
    fetched: list[str] = []

    def fetch(resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        fetched.append(name)
        return {
            "metadata": {"name": name, "namespace": namespace},
            "data": {"k": "v"},
            "binaryData": {"b": "AAE="},
        }

    cache = CachedConfigObjects(fetch, ttl=10.0, clock=lambda: now[0])
    first = cache.get("configmaps", "default", "app")
    assert first is not None and first.data == {"k": b"v", "b": b"\x00\x01"}
    cache.get("configmaps", "default", "app")
    now[0] = 11.0
    cache.get("configmaps", "default", "app")
    assert fetched == ["app", "app"]
    with pytest.raises(ConfigLookupError, match="not valid base64"):
        decode_object("secrets", {"metadata": {"name": "s"}, "data": {"k": "!!"}})


@pytest.mark.parametrize(
    ("spec", "field", "problem"),
    [
        (
            {"volumes": [{"name": "v", "emptyDir": {}, "hostPath": {"path": "/x"}}]},
            "spec.volumes[0].name",
            "exactly one",
        ),
        (
            {"volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]},
            "spec.volumes",
            "Duplicate",
        ),
        (
            {"volumes": [{"name": "v", "hostPath": {"path": "/x", "type": "Dir"}}]},
            "spec.volumes[0].hostPath.type",
            "Unsupported",
        ),
        (
            {"container": {"volumeMounts": [{"name": "v", "mountPath": "/a", "subPath": "../b"}]}},
            "subPath",
            "'..'",
        ),
        (
            {"volumes": [{"name": "v", "configMap": {"name": "c", "items": [{"key": "k", "path": "/abs"}]}}]},
            "path",
            "relative",
        ),
        (
            {"volumes": [{"name": "v", "secret": {"secretName": "s", "defaultMode": 512}}]},
            "defaultMode",
            "0777",
        ),
        ({"volumes": [{"name": "v", "emptyDir": {"sizeLimt": "1Mi"}}]}, "sizeLimt", "unknown field"),
    ],
)
def test_the_model_refuses_what_kube_refuses(spec: dict[str, Any], field: str, problem: str) -> None:
    with pytest.raises(ValidationError) as caught:
        _pod(spec)
    assert field in str(caught.value) and problem in str(caught.value)


def test_an_unsupported_volume_type_is_kept_for_the_volume_manager_to_refuse() -> None:
    pod = _pod({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]})
    assert pod.volumes[0].kind == "persistentVolumeClaim"


def test_the_cache_forgets_what_no_pod_references() -> None:
    from agent.util.configobjects import pod_references

    pod = _pod(
        {
            "volumes": [
                {
                    "name": "c",
                    "projected": {"sources": [{"secret": {"name": "s"}}, {"configMap": {"name": "c"}}]},
                }
            ],
            "container": {
                "envFrom": [{"configMapRef": {"name": "e"}}],
                "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "k", "key": "x"}}}],
            },
        }
    )
    refs = pod_references(pod)
    assert refs == {
        ("secrets", "default", "s"),
        ("configmaps", "default", "c"),
        ("configmaps", "default", "e"),
        ("secrets", "default", "k"),
    }
    fetched: list[str] = []

    def fetch(resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        fetched.append(name)
        return None

    cache = CachedConfigObjects(fetch, ttl=60.0)
    cache.get("configmaps", "default", "c")
    cache.get("configmaps", "default", "old")
    cache.forget_except(refs)
    cache.get("configmaps", "default", "c")
    cache.get("configmaps", "default", "old")
    assert fetched == ["c", "old", "old"]
