"""Calling scheduler extenders over HTTP from our own scheduler, as kube-scheduler does.

For each pod (kube's schedule_one.go and extender.go):
1. Filter: after our filter plugins, each extender with a filterVerb that is interested in
   the pod (no managedResources, or a container requests or limits one of them) gets the
   still-feasible nodes, as NodeNames if it is nodeCacheCapable, else the full Nodes. It
   answers which pass; FailedNodes and FailedAndUnresolvableNodes give the reasons, which
   join the FitError histogram ("0/3 nodes are available: 3 Insufficient kubenode.io/gpu").
   An error (connection refused, timeout after httpTimeout, non-200, a body that is not an
   ExtenderFilterResult, its Error set, a node name we did not send) is skipped for an
   `ignorable` extender and fails the cycle for any other one: the pod backs off and gets a
   FailedScheduling event naming the extender and the cause.
2. Prioritize: when more than one node is feasible, each interested extender with a
   prioritizeVerb scores them 0..10; score x weight x (100 / 10) is added to the plugins'
   total. Errors here are logged and ignored, as kube ignores them.
3. Bind: the first extender with a bindVerb interested in the pod binds it
   (`ExtenderBinder`); otherwise the scheduler's own binder does.
Extenders are called one after another within the cycle (kube calls prioritize in
parallel); with one extender, the common case, that is the same.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import orjson
import urllib3

from kubenode.model.objects import Node, Pod
from scheduler import extender_api as api
from scheduler.extender_config import ExtenderConfig
from scheduler.filters import FilterResult
from scheduler.nodetable import Int64Array, NodeTable

log = logging.getLogger(__name__)

MAX_NODE_SCORE = 100
SCORE_SCALE = MAX_NODE_SCORE // api.MAX_EXTENDER_PRIORITY


class ExtenderError(RuntimeError):
    """A call to an extender failed; the message names the extender, the verb and the cause."""


def _ssl_context(config: ExtenderConfig) -> ssl.SSLContext:
    tls = config.tls
    context = ssl.create_default_context(cafile=tls.ca_file or None, cadata=tls.ca_data or None)
    if tls.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if tls.cert_file:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    return context


class HttpExtender:
    """One configured extender: interest, and the three calls."""

    def __init__(self, config: ExtenderConfig) -> None:
        self.config = config
        self._managed = frozenset(r.name for r in config.managed_resources)
        kwargs: dict[str, Any] = {}
        if config.enable_https or config.url_prefix.startswith("https://"):
            kwargs["ssl_context"] = _ssl_context(config)
            if config.tls.server_name:
                kwargs["server_hostname"] = config.tls.server_name
        self._http = urllib3.PoolManager(
            maxsize=32, retries=False, timeout=urllib3.Timeout(total=config.http_timeout), **kwargs
        )

    @property
    def name(self) -> str:
        return self.config.url_prefix

    def is_interested(self, pod: Pod) -> bool:
        if not self._managed:
            return True
        return any(
            not self._managed.isdisjoint(c.requests) or not self._managed.isdisjoint(c.limits)
            for c in pod.all_containers
        )

    def send(self, verb: str, body: Any) -> Any:
        url = f"{self.config.url_prefix}/{verb}"
        try:
            resp = self._http.request(
                "POST", url, body=orjson.dumps(body), headers={"Content-Type": "application/json"}
            )
        except urllib3.exceptions.HTTPError as exc:
            raise ExtenderError(f"extender {url}: {exc}") from None
        if resp.status != 200:
            text = resp.data[:200].decode("utf-8", "replace")
            raise ExtenderError(f"extender {url}: HTTP {resp.status}: {text}")
        try:
            return orjson.loads(resp.data)
        except orjson.JSONDecodeError as exc:
            raise ExtenderError(f"extender {url}: the answer is not JSON: {exc}") from None

    def _args(self, pod: Pod, names: Sequence[str], nodes: Callable[[], list[Mapping[str, Any]]]) -> Any:
        if self.config.node_cache_capable:
            return api.extender_args(pod.raw, None, names)
        return api.extender_args(pod.raw, nodes(), None)

    def filter(
        self, pod: Pod, names: Sequence[str], nodes: Callable[[], list[Mapping[str, Any]]]
    ) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """(names that pass, FailedNodes, FailedAndUnresolvableNodes)."""
        answer = self.send(self.config.filter_verb, self._args(pod, names, nodes))
        try:
            result = api.mapping(answer, "ExtenderFilterResult")
            error = api.get(result, api.ERROR)
            if error:
                raise ExtenderError(f"extender {self.name}/{self.config.filter_verb}: {error}")
            return (
                api.passed_names(result, self.config.node_cache_capable),
                api.reasons(api.get(result, api.FAILED_NODES), api.FAILED_NODES),
                api.reasons(api.get(result, api.FAILED_AND_UNRESOLVABLE), api.FAILED_AND_UNRESOLVABLE),
            )
        except api.BadBody as exc:
            raise ExtenderError(f"extender {self.name}/{self.config.filter_verb}: {exc}") from None

    def prioritize(
        self, pod: Pod, names: Sequence[str], nodes: Callable[[], list[Mapping[str, Any]]]
    ) -> list[tuple[str, int]]:
        answer = self.send(self.config.prioritize_verb, self._args(pod, names, nodes))
        try:
            return api.parse_priorities(answer)
        except api.BadBody as exc:
            raise ExtenderError(f"extender {self.name}/{self.config.prioritize_verb}: {exc}") from None

    def bind(self, pod: Pod, node: str) -> None:
        answer = self.send(self.config.bind_verb, api.binding_args(pod.name, pod.namespace, pod.uid, node))
        error = api.get(answer, api.ERROR) if isinstance(answer, Mapping) else "not an ExtenderBindingResult"
        if error:
            raise ExtenderError(f"extender {self.name}/{self.config.bind_verb}: {error}")

    def close(self) -> None:
        self._http.clear()


class ExtenderChain:
    """The configured extenders, in order, applied to one scheduling cycle's node table."""

    def __init__(self, configs: Sequence[ExtenderConfig]) -> None:
        self.extenders = [HttpExtender(c) for c in configs]

    @staticmethod
    def _named(table: NodeTable, slots: Sequence[int]) -> tuple[list[str], Callable[[], list[Any]]]:
        nodes: list[Node] = [table.node(int(s)) for s in slots]
        return [n.name for n in nodes], lambda: [n.raw for n in nodes]

    def filter(self, pod: Pod, table: NodeTable, result: FilterResult) -> str:
        """Narrow result.feasible in place and add the extenders' reasons to its failures.
        Returns why the cycle fails ("" if it does not)."""
        for extender in self.extenders:
            if not extender.config.filter_verb or not extender.is_interested(pod):
                continue
            slots = np.flatnonzero(result.feasible)
            if len(slots) == 0:
                break
            names, nodes = self._named(table, slots.tolist())
            try:
                passed, failed, unresolvable = extender.filter(pod, names, nodes)
                keep = self._passing(extender, table, result, passed)
            except ExtenderError as exc:
                if extender.config.ignorable:
                    log.warning("ignorable extender skipped for %s: %s", pod.key, exc)
                    continue
                return str(exc)
            by_reason: dict[str, list[int]] = {}
            for name, reason in {**failed, **unresolvable}.items():
                slot = table.slot.get(name)
                if slot is not None and result.feasible[slot] and not keep[slot]:
                    by_reason.setdefault(reason, []).append(slot)
            result.feasible &= keep
            for reason, failing in by_reason.items():
                mask = np.zeros(len(result.feasible), bool)
                mask[failing] = True
                result.failures.append((reason, mask))
        return ""

    @staticmethod
    def _passing(
        extender: HttpExtender, table: NodeTable, result: FilterResult, passed: Sequence[str]
    ) -> np.ndarray[Any, np.dtype[np.bool_]]:
        keep = np.zeros(len(result.feasible), bool)
        for name in passed:
            slot = table.slot.get(name)
            if slot is None or not result.feasible[slot]:
                raise ExtenderError(
                    f"extender {extender.name} claims a filtered node {name!r} "
                    "which is not found in the input node list"
                )
            keep[slot] = True
        return keep

    def scores(self, pod: Pod, table: NodeTable, feasible: np.ndarray[Any, np.dtype[np.bool_]]) -> Int64Array:
        """The extenders' weighted scores per slot, on the plugins' scale (x 100/10)."""
        extra = np.zeros(len(feasible), np.int64)
        names: list[str] | None = None
        nodes: Callable[[], list[Any]] = list
        for extender in self.extenders:
            if not extender.config.prioritize_verb or not extender.is_interested(pod):
                continue
            if names is None:
                names, nodes = self._named(table, np.flatnonzero(feasible).tolist())
            try:
                priorities = extender.prioritize(pod, names, nodes)
            except ExtenderError as exc:  # kube ignores prioritize errors, ignorable or not
                log.warning("extender prioritize ignored for %s: %s", pod.key, exc)
                continue
            for host, score in priorities:
                slot = table.slot.get(host)
                if slot is not None and feasible[slot]:
                    extra[slot] += score * extender.config.weight
        return extra * SCORE_SCALE

    def binder_for(self, pod: Pod) -> HttpExtender | None:
        return next((e for e in self.extenders if e.config.bind_verb and e.is_interested(pod)), None)

    def close(self) -> None:
        for extender in self.extenders:
            extender.close()


class Binder(Protocol):
    def bind(self, pod: Pod, node: str) -> None: ...

    def evict(self, victim: Pod, preemptor: Pod, node: str) -> None: ...


class ExtenderBinder:
    """The scheduler's binder with kube's extendersBinding in front: a pod an interested binding
    extender manages is bound by that extender; every other pod, and every eviction, goes to
    the inner binder. After an extender bind, the inner binder's `scheduled(pod, node)` (if it
    has one) records the Scheduled event, and its `may_act()` (if any) gates the call, so a
    scheduler that lost its lease asks no extender to bind."""

    def __init__(self, inner: Binder, chain: ExtenderChain) -> None:
        self.inner = inner
        self.chain = chain

    def bind(self, pod: Pod, node: str) -> None:
        extender = self.chain.binder_for(pod)
        if extender is None:
            self.inner.bind(pod, node)
            return
        may_act = getattr(self.inner, "may_act", None)
        if may_act is not None and not may_act():
            raise ExtenderError("not the leader: not asking the extender to bind")
        extender.bind(pod, node)
        scheduled = getattr(self.inner, "scheduled", None)
        if scheduled is not None:
            scheduled(pod, node)

    def evict(self, victim: Pod, preemptor: Pod, node: str) -> None:
        self.inner.evict(victim, preemptor, node)


def with_extender_binder(binder: Binder, chain: ExtenderChain | None) -> Binder:
    """The binder to give the engine: wrapped only if some extender binds."""
    if chain is None or not any(e.config.bind_verb for e in chain.extenders):
        return binder
    return ExtenderBinder(binder, chain)
