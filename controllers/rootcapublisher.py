"""The root CA publisher (kube's certificates/rootcacertpublisher): `kube-root-ca.crt` in every namespace.

Every namespace is queued when it appears or changes, and again when its `kube-root-ca.crt` ConfigMap is
changed or deleted; `sync` creates the ConfigMap (`ca.crt`: the CA bundle that verifies the API server,
with kube's description annotation) or puts the bundle and annotation back where they differ. A
namespace being deleted gets none. Pods read it through their `kube-api-access-*` projected volume.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from controllers.framework import Controller, Obj, SharedInformers, is_active_namespace, meta
from controllers.resources import CONFIGMAPS, NAMESPACES
from kubenode.kubeclient import AlreadyExists, KubeClient, NotFound

NAME = "kube-root-ca.crt"
DATA_KEY = "ca.crt"
DESCRIPTION_KEY = "kubernetes.io/description"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
    "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
    "distributions of Kubernetes clusters."
)


class RootCAPublisher(Controller):
    name = "root-ca-cert-publisher"
    workers = 1

    def __init__(
        self, client: KubeClient, informers: SharedInformers, may_act: Callable[[], bool], root_ca: str
    ) -> None:
        super().__init__(client, may_act)
        self.root_ca = root_ca
        self.namespaces = informers.on(
            NAMESPACES, add=self._namespace, update=lambda _o, n: self._namespace(n)
        )
        self.configmaps = informers.on(
            CONFIGMAPS, update=lambda _o, n: self._configmap(n), delete=self._configmap
        )

    def _namespace(self, namespace: Obj) -> None:
        self.enqueue_key(str(meta(namespace).get("name")))

    def _configmap(self, configmap: Obj) -> None:
        if meta(configmap).get("name") == NAME:
            self.enqueue_key(str(meta(configmap).get("namespace")))

    def sync(self, key: str) -> None:
        if not is_active_namespace(self.namespaces.get(key)):
            return
        current = self.configmaps.get(f"{key}/{NAME}")
        if current is None:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": NAME, "namespace": key, "annotations": {DESCRIPTION_KEY: DESCRIPTION}},
                "data": {DATA_KEY: self.root_ca},
            }
            with contextlib.suppress(AlreadyExists, NotFound):  # the informer was behind; the namespace went
                self.client.create(CONFIGMAPS, body, key)
            return
        annotations = meta(current).get("annotations") or {}
        if (current.get("data") or {}) == {DATA_KEY: self.root_ca} and annotations.get(
            DESCRIPTION_KEY
        ) == DESCRIPTION:
            return
        updated = {
            **current,
            "metadata": {**meta(current), "annotations": {**annotations, DESCRIPTION_KEY: DESCRIPTION}},
            "data": {DATA_KEY: self.root_ca},
        }
        with contextlib.suppress(NotFound):
            self.client.update(CONFIGMAPS, updated)  # a conflict is retried from the informer's newer copy
