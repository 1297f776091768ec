"""Protobuf bodies of `kubectl create deployment|job|serviceaccount` (their typed clients send nothing else).

Only the fields those commands set are read (k8s.io/api apps/v1, batch/v1 and core/v1 generated.proto):
the object's metadata, replicas, the selector's matchLabels, and a pod template of containers with
name, image, command, args and ports, plus the restart policy. Anything else such a body carries is
dropped, so a typed client writing more than kubectl does should send JSON.
"""

from __future__ import annotations

from typing import Any

from apiserver import protowire as pw
from apiserver.protobody import object_meta, string_map


def _container(data: bytes) -> dict[str, Any]:
    """Container: name 1, image 2, command 3, args 4, workingDir 5, ports 6 {name 1, containerPort 3,
    protocol 4}, imagePullPolicy 14."""
    out: dict[str, Any] = {}
    for key, number in (("name", 1), ("image", 2), ("workingDir", 5), ("imagePullPolicy", 14)):
        if value := pw.string(data, number):
            out[key] = value
    for key, number in (("command", 3), ("args", 4)):
        if values := [v.decode() for v in pw.repeated(data, number)]:
            out[key] = values
    ports = []
    for raw in pw.repeated(data, 6):
        port: dict[str, Any] = {"containerPort": pw.varint(raw, 3) or 0}
        for key, number in (("name", 1), ("protocol", 4)):
            if value := pw.string(raw, number):
                port[key] = value
        ports.append(port)
    if ports:
        out["ports"] = ports
    return out


def _template(data: bytes) -> dict[str, Any]:
    """PodTemplateSpec: metadata 1, spec 2 {containers 2, restartPolicy 3}."""
    raw = pw.message(data, 2)
    spec: dict[str, Any] = {"containers": [_container(c) for c in pw.repeated(raw, 2)]}
    if policy := pw.string(raw, 3):
        spec["restartPolicy"] = policy
    return {"metadata": object_meta(pw.message(data, 1)), "spec": spec}


def _selector(data: bytes) -> dict[str, Any] | None:
    """LabelSelector: matchLabels 1 (only what kubectl create sets)."""
    if not data:
        return None
    return {"matchLabels": string_map(data, 1)}


def deployment(data: bytes) -> dict[str, Any]:
    """apps/v1 Deployment: metadata 1, spec 2 {replicas 1, selector 2, template 3}."""
    raw = pw.message(data, 2)
    spec: dict[str, Any] = {"template": _template(pw.message(raw, 3))}
    if (replicas := pw.varint(raw, 1)) is not None:
        spec["replicas"] = replicas
    if (selector := _selector(pw.message(raw, 2))) is not None:
        spec["selector"] = selector
    meta = object_meta(pw.message(data, 1))
    return {"kind": "Deployment", "apiVersion": "apps/v1", "metadata": meta, "spec": spec}


def job(data: bytes) -> dict[str, Any]:
    """batch/v1 Job: metadata 1, spec 2 {parallelism 1, completions 2, selector 4, template 6}."""
    raw = pw.message(data, 2)
    spec: dict[str, Any] = {"template": _template(pw.message(raw, 6))}
    for key, number in (("parallelism", 1), ("completions", 2)):
        if (value := pw.varint(raw, number)) is not None:
            spec[key] = value
    if (selector := _selector(pw.message(raw, 4))) is not None:
        spec["selector"] = selector
    return {
        "kind": "Job",
        "apiVersion": "batch/v1",
        "metadata": object_meta(pw.message(data, 1)),
        "spec": spec,
    }


def service_account(data: bytes) -> dict[str, Any]:
    """core/v1 ServiceAccount: metadata 1."""
    return {"kind": "ServiceAccount", "apiVersion": "v1", "metadata": object_meta(pw.message(data, 1))}


WORKLOAD_DECODERS = {"Deployment": deployment, "Job": job, "ServiceAccount": service_account}
