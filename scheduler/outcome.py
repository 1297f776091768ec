"""What the engine decides and how it acts: the Binder protocols, an attempt's Outcome, a Nomination."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kubenode.model.objects import Pod
from scheduler.filters import Demand


class Binder(Protocol):
    """How the engine acts on the cluster. Both may raise: the pod concerned backs off and is retried."""

    def bind(self, pod: Pod, node: str) -> None: ...

    def evict(self, victim: Pod, preemptor: Pod, node: str) -> None: ...


class AsyncBinder(Binder, Protocol):
    """A binder that binds without a thread per bind in flight: `done(None)` or `done(error)` is
    called later, from any thread (or at once: `bind_async` may also raise)."""

    def bind_async(self, pod: Pod, node: str, done: Callable[[Exception | None], None]) -> None: ...


@dataclass(frozen=True)
class Outcome:
    """What one scheduling attempt (or a failed bind) decided for a pod."""

    pod: Pod
    node: str | None
    message: str
    nominated_node: str = ""
    victims: tuple[Pod, ...] = ()
    bind_failed: bool = False
    error: bool = False  # the attempt failed with an error (not a plain "does not fit")


@dataclass(frozen=True)
class Nomination:
    node: str
    priority: int
    demand: Demand
