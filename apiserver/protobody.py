"""Protobuf request bodies of kubectl's typed clients, turned into the JSON objects the handlers expect.

Field numbers are those of k8s.io/api and apimachinery's generated.proto. Only the kinds kubectl's typed
clients write here are read: Namespace (`kubectl create namespace`), DeleteOptions (typed deletes, e.g.
`drain --disable-eviction`), Eviction (`drain`), Binding (Go schedulers), ConfigMap and Secret
(`kubectl create configmap|secret`), Service (`kubectl create service`), TokenRequest (`kubectl create
token`), the self-reviews of `kubectl auth` (auth/reviews.py) and the workloads `kubectl create` writes
(protoworkloads.py) and the RBAC kinds (protorbac.py).
Any other kind gets `None`, which the caller answers with 415 as before.
"""

from __future__ import annotations

import base64
from typing import Any

from apiserver import protowire as pw

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"


def string_map(data: bytes, number: int) -> dict[str, str]:
    """map<string,string> = repeated entries {key 1, value 2}."""
    return {pw.string(entry, 1): pw.string(entry, 2) for entry in pw.repeated(data, number)}


def _bytes_map(data: bytes, number: int) -> dict[str, str]:
    """map<string,bytes>, as JSON has it: each value base64."""
    return {
        pw.string(entry, 1): base64.b64encode(pw.message(entry, 2)).decode()
        for entry in pw.repeated(data, number)
    }


def object_meta(data: bytes) -> dict[str, Any]:
    """ObjectMeta: name 1, generateName 2, namespace 3, uid 5, resourceVersion 6, labels 11, annotations 12,
    finalizers 14 (timestamps and managedFields are the server's to set)."""
    meta: dict[str, Any] = {}
    for key, number in (
        ("name", 1),
        ("generateName", 2),
        ("namespace", 3),
        ("uid", 5),
        ("resourceVersion", 6),
    ):
        if value := pw.string(data, number):
            meta[key] = value
    if labels := string_map(data, 11):
        meta["labels"] = labels
    if annotations := string_map(data, 12):
        meta["annotations"] = annotations
    if finalizers := [f.decode() for f in pw.repeated(data, 14)]:
        meta["finalizers"] = finalizers
    return meta


def delete_options(data: bytes) -> dict[str, Any]:
    """DeleteOptions: gracePeriodSeconds 1, preconditions 2 {uid 1, resourceVersion 2}, orphanDependents 3,
    propagationPolicy 4, dryRun 5."""
    out: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
    fields = pw.fields(data)
    grace = fields.get(1)
    if isinstance(grace, int):
        out["gracePeriodSeconds"] = grace - (1 << 64) if grace >= 1 << 63 else grace  # int64 two's complement
    if 2 in fields:
        pre = pw.message(data, 2)
        out["preconditions"] = {
            k: v for k, v in (("uid", pw.string(pre, 1)), ("resourceVersion", pw.string(pre, 2))) if v
        }
    if isinstance(fields.get(3), int):
        out["orphanDependents"] = bool(fields[3])
    if policy := pw.string(data, 4):
        out["propagationPolicy"] = policy
    if dry_run := [d.decode() for d in pw.repeated(data, 5)]:
        out["dryRun"] = dry_run
    return out


def namespace(data: bytes) -> dict[str, Any]:
    """Namespace: metadata 1, spec 2 {finalizers 1}."""
    out: dict[str, Any] = {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": object_meta(pw.message(data, 1)),
    }
    finalizers = [f.decode() for f in pw.repeated(pw.message(data, 2), 1)]
    if finalizers:
        out["spec"] = {"finalizers": finalizers}
    return out


def eviction(data: bytes) -> dict[str, Any]:
    """policy/v1 Eviction: metadata 1, deleteOptions 2."""
    out: dict[str, Any] = {
        "kind": "Eviction",
        "apiVersion": "policy/v1",
        "metadata": object_meta(pw.message(data, 1)),
    }
    if pw.message(data, 2):
        out["deleteOptions"] = delete_options(pw.message(data, 2))
    return out


def access_review(raw: bytes) -> dict[str, Any]:
    """authorization/v1 generated.proto: review.spec = 2; spec.resourceAttributes = 1 (namespace 1,
    verb 2, group 3, version 4, resource 5, subresource 6, name 7), spec.nonResourceAttributes = 2
    (path 1, verb 2)."""
    spec = pw.message(raw, 2)
    out: dict[str, Any] = {}
    resource = pw.message(spec, 1)
    if resource:
        names = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
        out["resourceAttributes"] = {
            key: pw.string(resource, i) for i, key in enumerate(names, 1) if pw.string(resource, i)
        }
    other = pw.message(spec, 2)
    if other:
        out["nonResourceAttributes"] = {
            "path": pw.string(other, 1),
            "verb": pw.string(other, 2),
        }
    return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1", "spec": out}


def binding(data: bytes) -> dict[str, Any]:
    """core/v1 Binding (what Go schedulers post): metadata 1, target 2 = ObjectReference {kind 1,
    namespace 2, name 3, uid 4, apiVersion 5}."""
    ref = pw.message(data, 2)
    names = ("kind", "namespace", "name", "uid", "apiVersion")
    target = {key: pw.string(ref, i) for i, key in enumerate(names, 1) if pw.string(ref, i)}
    return {
        "kind": "Binding",
        "apiVersion": "v1",
        "metadata": object_meta(pw.message(data, 1)),
        "target": target,
    }


def _service_port(data: bytes) -> dict[str, Any]:
    """ServicePort: name 1, protocol 2, port 3, targetPort 4 = IntOrString {type 1, intVal 2, strVal 3},
    nodePort 5, appProtocol 6."""
    port: dict[str, Any] = {
        k: pw.string(data, i) for k, i in (("name", 1), ("protocol", 2), ("appProtocol", 6))
    }
    port = {k: v for k, v in port.items() if v}
    for key, number in (("port", 3), ("nodePort", 5)):
        if (value := pw.varint(data, number)) is not None:
            port[key] = value
    if target := pw.message(data, 4):
        port["targetPort"] = pw.string(target, 3) if pw.varint(target, 1) == 1 else pw.varint(target, 2) or 0
    return port


def service(data: bytes) -> dict[str, Any]:
    """core/v1 Service: metadata 1, spec 2 {ports 1, selector 2, clusterIP 3, type 4, externalIPs 5,
    sessionAffinity 7, externalName 10, clusterIPs 18} (what `kubectl create service` sets)."""
    raw = pw.message(data, 2)
    spec: dict[str, Any] = {}
    if ports := [_service_port(p) for p in pw.repeated(raw, 1)]:
        spec["ports"] = ports
    if selector := string_map(raw, 2):
        spec["selector"] = selector
    for key, number in (("clusterIP", 3), ("type", 4), ("sessionAffinity", 7), ("externalName", 10)):
        if value := pw.string(raw, number):
            spec[key] = value
    for key, number in (("externalIPs", 5), ("clusterIPs", 18)):
        if values := [v.decode() for v in pw.repeated(raw, number)]:
            spec[key] = values
    return {"kind": "Service", "apiVersion": "v1", "metadata": object_meta(pw.message(data, 1)), "spec": spec}


def rules_review(raw: bytes) -> dict[str, Any]:
    """authorization/v1 SelfSubjectRulesReview: spec = 2 {namespace = 1}."""
    namespace = pw.string(pw.message(raw, 2), 1)
    return {
        "kind": "SelfSubjectRulesReview",
        "apiVersion": "authorization.k8s.io/v1",
        "spec": {"namespace": namespace},
    }


def config_map(data: bytes) -> dict[str, Any]:
    """core/v1 ConfigMap (`kubectl create configmap`): metadata 1, data 2, binaryData 3, immutable 4."""
    out: dict[str, Any] = {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": object_meta(pw.message(data, 1)),
    }
    for key, value in (("data", string_map(data, 2)), ("binaryData", _bytes_map(data, 3))):
        if value:
            out[key] = value
    if isinstance(immutable := pw.fields(data).get(4), int):
        out["immutable"] = bool(immutable)
    return out


def secret(data: bytes) -> dict[str, Any]:
    """core/v1 Secret (`kubectl create secret`): metadata 1, data 2, type 3, stringData 4, immutable 5."""
    out: dict[str, Any] = {"kind": "Secret", "apiVersion": "v1", "metadata": object_meta(pw.message(data, 1))}
    for key, value in (("data", _bytes_map(data, 2)), ("stringData", string_map(data, 4))):
        if value:
            out[key] = value
    if kind := pw.string(data, 3):
        out["type"] = kind
    if isinstance(immutable := pw.fields(data).get(5), int):
        out["immutable"] = bool(immutable)
    return out


def token_request(raw: bytes) -> dict[str, Any]:
    """authentication/v1 TokenRequest (`kubectl create token`): spec = 2 {audiences 1 (repeated),
    boundObjectRef 3 {kind 1, apiVersion 2, name 3, uid 4}, expirationSeconds 4}."""
    spec_raw = pw.message(raw, 2)
    spec: dict[str, Any] = {"audiences": [a.decode() for a in pw.repeated(spec_raw, 1)]}
    if (seconds := pw.varint(spec_raw, 4)) is not None:
        spec["expirationSeconds"] = seconds
    if ref := pw.message(spec_raw, 3):
        keys = ("kind", "apiVersion", "name", "uid")
        spec["boundObjectRef"] = {
            key: pw.string(ref, i) for i, key in enumerate(keys, 1) if pw.string(ref, i)
        }
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


DECODERS = {
    "Namespace": namespace,
    "DeleteOptions": delete_options,
    "Eviction": eviction,
    "Binding": binding,
    "Service": service,
    "SelfSubjectAccessReview": access_review,
    "SelfSubjectRulesReview": rules_review,
    "ConfigMap": config_map,
    "Secret": secret,
    "TokenRequest": token_request,
}


def _add_workload_decoders() -> None:
    """`kubectl create deployment|job|serviceaccount`: protoworkloads.py, and `kubectl create
    role|...binding`: protorbac.py (both read ObjectMeta here)."""
    from apiserver.protorbac import RBAC_DECODERS
    from apiserver.protoworkloads import WORKLOAD_DECODERS

    DECODERS.update(WORKLOAD_DECODERS)
    DECODERS.update(RBAC_DECODERS)


_add_workload_decoders()


def decode(body: bytes) -> dict[str, Any] | None:
    """The JSON form of a protobuf body: any kind of k8s.io/api's tables (protoschema.py, the whole object
    as Go's JSON would have it), else a kind above; None for another kind; ValueError if malformed."""
    from apiserver import protoschema

    decoded = protoschema.decode(body)
    if decoded is not None:
        return decoded
    _, kind = pw.envelope_kind(body)
    decoder = DECODERS.get(kind)
    return decoder(pw.unwrap(body)) if decoder is not None else None
