"""The agent's token manager against an injected clock and requester: kube's refresh points (80% of the
lifetime, 24 hours), the jitter, a failed refresh keeping a valid token, a failure with none, and the
tokens of a pod forgotten with it."""

from __future__ import annotations

import pytest

from agent.token.manager import IssuedToken, TokenError, TokenManager, TokenSpec

SPEC = TokenSpec(("api",), 3600, "web", "uid-1")


class Issuer:
    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.calls = 0
        self.fail = False

    def __call__(self, namespace: str, account: str, spec: TokenSpec) -> IssuedToken:
        if self.fail:
            raise RuntimeError("refused")
        self.calls += 1
        return IssuedToken(f"t{self.calls}", self.clock[0] + spec.expiration_seconds, spec.expiration_seconds)


def manager(clock: list[float], jitter: float = 0.0) -> tuple[TokenManager, Issuer]:
    issuer = Issuer(clock)
    return TokenManager(issuer, clock=lambda: clock[0], jitter=lambda: jitter), issuer


def test_refresh_at_80_percent_of_the_lifetime() -> None:
    clock = [1000.0]
    tokens, issuer = manager(clock)
    assert tokens.get("default", "default", SPEC) == "t1"
    clock[0] += 0.8 * 3600 - 1
    assert tokens.get("default", "default", SPEC) == "t1" and issuer.calls == 1
    clock[0] += 2
    assert tokens.get("default", "default", SPEC) == "t2"


def test_jitter_brings_the_refresh_forward_by_up_to_10_seconds() -> None:
    clock = [1000.0]
    tokens, _ = manager(clock, jitter=1.0)
    tokens.get("default", "default", SPEC)
    clock[0] += 0.8 * 3600 - 9
    assert tokens.get("default", "default", SPEC) == "t2"


def test_a_long_token_is_refreshed_after_24_hours() -> None:
    clock = [0.0]
    tokens, _ = manager(clock)
    week = TokenSpec((), 7 * 24 * 3600, "web", "uid-1")
    tokens.get("default", "default", week)
    clock[0] = 24 * 3600 - 1
    assert tokens.get("default", "default", week) == "t1"
    clock[0] = 24 * 3600 + 1
    assert tokens.get("default", "default", week) == "t2"


def test_a_failed_refresh_keeps_a_valid_token_and_fails_without_one() -> None:
    clock = [0.0]
    tokens, issuer = manager(clock)
    tokens.get("default", "default", SPEC)
    issuer.fail = True
    clock[0] = 3500
    assert tokens.get("default", "default", SPEC) == "t1"
    clock[0] = 3601
    with pytest.raises(TokenError, match="failed to fetch token: refused"):
        tokens.get("default", "default", SPEC)


def test_each_request_its_own_token_and_a_pods_tokens_go_with_it() -> None:
    clock = [0.0]
    tokens, _ = manager(clock)
    vault = TokenSpec(("vault",), 3600, "web", "uid-1")
    other = TokenSpec(("api",), 3600, "db", "uid-2")
    assert len({tokens.get("default", "default", s) for s in (SPEC, vault, other)}) == 3
    tokens.drop_pod("uid-1")
    assert len(tokens) == 1
    clock[0] = 3600 + 61
    tokens.get("default", "default", vault)  # the expired token of db is swept, vault's asked again
    assert len(tokens) == 1
