"""The ServiceAccount admission plugin (kube's plugin/pkg/admission/serviceaccount), on pod creation.

Flow of `mutate`: a pod with no `serviceAccountName` gets `default`; the ServiceAccount it names must
exist (403 otherwise, in kube's words; one difference: while `default` is missing, a pod that named no
account is admitted without a token, so a server without the controller manager still runs pods);
unless `automountServiceAccountToken: false` on the pod (or, the pod silent, on the ServiceAccount),
every init and app container without a mount at /var/run/secrets/kubernetes.io/serviceaccount gets one
of a `kube-api-access-<5 chars>` projected volume:
a bound token (`serviceAccountToken`, 3607 s, path `token`), the `kube-root-ca.crt` ConfigMap's `ca.crt`
and the namespace from the downward API, mode 0644. Mirror pods (static pods a node publishes) are left
alone. It runs before validation, as kube's mutating admission does.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from typing import Any

from apiserver.request import RequestInfo
from apiserver.status import forbidden

MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
VOLUME_PREFIX = "kube-api-access-"
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
# kube's WarnOnlyBoundTokenExpirationSeconds: what the admission plugin asks a projected token to live.
TOKEN_EXPIRATION_SECONDS = 3607
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# utilrand.String's alphabet: no vowels, no look-alikes, so a suffix never spells a word.
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

# (namespace, name) -> the stored ServiceAccount, or None
AccountLookup = Callable[[str, str], Mapping[str, Any] | None]


def _suffix() -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(5))


def api_access_volume(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
                {"configMap": {"name": ROOT_CA_CONFIGMAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
            "defaultMode": 0o644,
        },
    }


class ServiceAccountAdmission:
    def __init__(self, account: AccountLookup) -> None:
        self._account = account

    def mutate(self, user: Any, info: RequestInfo, pod: dict[str, Any]) -> None:
        if info.resource != "pods" or info.api_group != "" or info.subresource or info.verb != "create":
            return
        meta = pod.get("metadata") or {}
        if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
            return
        spec = pod.setdefault("spec", {})
        named = bool(spec.get("serviceAccountName") or spec.get("serviceAccount"))
        name = str(spec.get("serviceAccountName") or spec.get("serviceAccount") or "default")
        namespace = info.namespace
        account = self._account(namespace, name)
        if account is None and not named:
            # kubenode: the default account not made yet (no controller manager, or not yet): admitted
            # as sent, without the token volume, where kube refuses the pod until its controller made it.
            return
        spec["serviceAccountName"] = spec["serviceAccount"] = name
        if account is None:
            raise forbidden(
                f'pods "{meta.get("name", "")}" is forbidden: error looking up service account '
                f'{namespace}/{name}: serviceaccount "{name}" not found'
            )
        automount = spec.get("automountServiceAccountToken")
        if automount is None:
            automount = account.get("automountServiceAccountToken")
        if automount is False:
            return
        self._mount(spec)

    @staticmethod
    def _mount(spec: dict[str, Any]) -> None:
        volumes = spec.get("volumes") or []
        existing = next(
            (v["name"] for v in volumes if str(v.get("name", "")).startswith(VOLUME_PREFIX)), None
        )
        volume_name = existing or VOLUME_PREFIX + _suffix()
        needed = False
        for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            mounts = container.setdefault("volumeMounts", [])
            if any(m.get("mountPath") == MOUNT_PATH for m in mounts):
                continue
            mounts.append({"name": volume_name, "readOnly": True, "mountPath": MOUNT_PATH})
            needed = True
        if needed and existing is None:
            spec["volumes"] = [*volumes, api_access_volume(volume_name)]
