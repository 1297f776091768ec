"""The ServiceAccounts controller (kube's pkg/controller/serviceaccount): a `default` in every namespace.

Every active Namespace is queued when it appears or changes, and again when its `default`
ServiceAccount is deleted; `sync` creates the ServiceAccount when the informer does not have it
(AlreadyExists is success: the informer was behind). A namespace being deleted gets none.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from controllers.framework import Controller, Obj, SharedInformers, is_active_namespace, meta
from controllers.resources import NAMESPACES, SERVICEACCOUNTS
from kubenode.kubeclient import AlreadyExists, KubeClient, NotFound

DEFAULT = "default"


class ServiceAccountsController(Controller):
    name = "serviceaccount"
    workers = 1

    def __init__(self, client: KubeClient, informers: SharedInformers, may_act: Callable[[], bool]) -> None:
        super().__init__(client, may_act)
        self.namespaces = informers.on(
            NAMESPACES, add=self._namespace, update=lambda _o, n: self._namespace(n)
        )
        self.accounts = informers.on(SERVICEACCOUNTS, delete=self._account_deleted)

    def _namespace(self, namespace: Obj) -> None:
        self.enqueue_key(str(meta(namespace).get("name")))

    def _account_deleted(self, account: Obj) -> None:
        if meta(account).get("name") == DEFAULT:
            self.enqueue_key(str(meta(account).get("namespace")))

    def sync(self, key: str) -> None:
        if not is_active_namespace(self.namespaces.get(key)):
            return
        if self.accounts.get(f"{key}/{DEFAULT}") is not None:
            return
        body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DEFAULT, "namespace": key}}
        with contextlib.suppress(AlreadyExists, NotFound):  # NotFound: the namespace went meanwhile
            self.client.create(SERVICEACCOUNTS, body, key)
