"""The bootstrap policy stored at start (apiserver/auth/bootstrap.py) against a real Store: created once,
reset when edited while annotated autoupdate "true", left alone once set to "false"; and the stored index
(apiserver/auth/rbacstore.py) follows each change."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from apiserver.auth import UserInfo
from apiserver.auth.bootstrap import AUTOUPDATE, bootstrap_objects, ensure_bootstrap_policy
from apiserver.auth.rbacstore import StoredPolicy
from apiserver.registry import build_strategies
from apiserver.request import request_info
from apiserver.storage.store import Store

SCHEDULER = UserInfo("system:kube-scheduler", "", ("system:authenticated",))
BIND = request_info("POST", "/api/v1/namespaces/default/pods/p/binding", {})


def _stored(store: Store, name: str) -> dict[str, Any]:
    entry = store.latest("clusterroles", "", name)
    assert entry is not None
    result: dict[str, Any] = orjson.loads(entry.data)
    return result


async def _scenario(path: Path) -> None:
    strategies = build_strategies()
    store = Store(path, {p: s.index for p, s in strategies.items()}, 1000)
    store.load()
    store.start(asyncio.get_running_loop())
    policy = StoredPolicy(store.cache)
    assert await ensure_bootstrap_policy(store, strategies, bootstrap_objects()) == len(bootstrap_objects())
    assert await ensure_bootstrap_policy(store, strategies, bootstrap_objects()) == 0
    assert policy.decide(SCHEDULER, BIND) is not None

    edited = _stored(store, "system:kube-scheduler")
    edited["rules"] = []
    await store.write("clusterroles", "", "system:kube-scheduler", edited, "MODIFIED")
    assert policy.decide(SCHEDULER, BIND) is None  # the index follows the edit at once
    assert await ensure_bootstrap_policy(store, strategies, bootstrap_objects()) == 1
    (wanted,) = [
        o for r, o in bootstrap_objects() if (r, o["metadata"]["name"]) == ("clusterroles", SCHEDULER.name)
    ]
    assert _stored(store, "system:kube-scheduler")["rules"] == wanted["rules"]
    assert policy.decide(SCHEDULER, BIND) is not None

    kept = _stored(store, "system:kube-scheduler")
    kept["rules"] = []
    kept["metadata"]["annotations"][AUTOUPDATE] = "false"
    await store.write("clusterroles", "", "system:kube-scheduler", kept, "MODIFIED")
    assert await ensure_bootstrap_policy(store, strategies, bootstrap_objects()) == 0
    assert _stored(store, "system:kube-scheduler")["rules"] == []
    store.close()


def test_bootstrap_policy_is_reconciled_as_kube_does(tmp_path: Path) -> None:
    asyncio.run(_scenario(tmp_path / "db"))
