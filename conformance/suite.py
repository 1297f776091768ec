"""Run the suite: start the kubelet double (and the plugin), wait for registrations, run the checks."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from conformance.checks import ALL_CHECK_NAMES, PER_RESOURCE_CHECKS, RESTART_CHECK, Check
from conformance.harness import KubeletDouble
from conformance.process import PluginProcess
from conformance.results import CheckResult, Status
from conformance.target import Fail, Limits, Skip, Target

ALL_RESOURCES = "*"


@dataclass
class SuiteConfig:
    kubelet_dir: Path
    plugin_cmd: str | None = None
    resource: str | None = None
    only: Sequence[str] = ()
    limits: Limits = field(default_factory=Limits)


def select_checks(only: Sequence[str]) -> list[str]:
    """Check names chosen by `only` (exact names or group prefixes such as `allocate`); all if empty."""
    if not only:
        return list(ALL_CHECK_NAMES)
    chosen = []
    for item in only:
        matches = [n for n in ALL_CHECK_NAMES if n == item or n.startswith(item + ".")]
        if not matches:
            raise ValueError(f"--only {item}: no such check or group (see --list)")
        chosen += [m for m in matches if m not in chosen]
    return [n for n in ALL_CHECK_NAMES if n in chosen]


def run_suite(config: SuiteConfig, emit: Callable[[CheckResult], None] = lambda r: None) -> list[CheckResult]:
    selected = select_checks(config.only)
    results: list[CheckResult] = []

    def record(result: CheckResult) -> None:
        results.append(result)
        emit(result)

    config.kubelet_dir.mkdir(parents=True, exist_ok=True)
    harness = KubeletDouble(config.kubelet_dir)
    process = PluginProcess(config.plugin_cmd, config.kubelet_dir) if config.plugin_cmd else None
    targets: list[Target] = []
    try:
        harness.start()
        if process is not None:
            process.start(on_exit=harness.wake)
        limits = config.limits

        def exited() -> bool:
            return process is not None and process.exit_code() is not None

        if not harness.wait_for_registrations(
            config.resource, limits.register, limits.settle, give_up=exited
        ):
            what = config.resource or "any resource"
            detail = f"no Register call for {what} within {limits.register:g} s"
            if exited():
                detail = f"no Register call for {what} before the plugin exited"
            record(
                CheckResult(
                    "register.received",
                    config.resource or ALL_RESOURCES,
                    Status.FAIL,
                    _with_exit(detail, process),
                    0.0,
                )
            )
            return results
        events = harness.latest()
        names = [config.resource] if config.resource else sorted(events)
        targets = [Target(events[n], config.kubelet_dir, limits) for n in names]
        for target in targets:
            for check in PER_RESOURCE_CHECKS:
                if check.name in selected:
                    record(_run_check(check, target))
        if RESTART_CHECK in selected:
            for result in _kubelet_restart(harness, names, config.kubelet_dir, limits):
                record(result)
        if process is not None and process.exit_code() is not None:
            record(
                CheckResult(
                    "plugin.process",
                    ALL_RESOURCES,
                    Status.FAIL,
                    _with_exit("the plugin exited", process),
                    0.0,
                )
            )
    finally:
        for target in targets:
            target.close()
        # The kubelet double goes first so that the plugin's shutdown is not reported as a lost stream.
        harness.close()
        if process is not None:
            process.stop(config.limits.stop_grace)
    return results


def _run_check(check: Check, target: Target) -> CheckResult:
    started = time.monotonic()
    try:
        status, detail = Status.PASS, check.run(target)
    except Fail as err:
        status, detail = Status.FAIL, str(err)
    except Skip as err:
        status, detail = Status.SKIP, str(err)
    except Exception as err:  # a check must never take the suite down; report what happened
        status, detail = Status.FAIL, f"check raised {err!r}"
    return CheckResult(check.name, target.resource, status, detail, time.monotonic() - started)


def _kubelet_restart(
    harness: KubeletDouble, names: list[str], kubelet_dir: Path, limits: Limits
) -> list[CheckResult]:
    restarted_at = harness.restart()
    deadline = restarted_at + limits.restart
    results = []
    for name in names:
        arrived = harness.wait_for_registrations(
            name, max(0.0, deadline - time.monotonic()), 0.0, since=restarted_at
        )
        waited = time.monotonic() - restarted_at
        if not arrived:
            detail = (
                f"no Register within {limits.restart:g} s after the dir was wiped and kubelet.sock recreated"
            )
            results.append(CheckResult(RESTART_CHECK, name, Status.FAIL, detail, waited))
            continue
        event = harness.latest(since=restarted_at)[name]
        took = event.at - restarted_at
        target = Target(event, kubelet_dir, limits)
        try:
            devices = len(target.read_first_message().devices)
        except (Fail, Skip) as err:
            results.append(CheckResult(RESTART_CHECK, name, Status.FAIL, f"re-registered, but {err}", waited))
            continue
        finally:
            target.close()
        detail = (
            f"re-registered {took:.2f} s after kubelet.sock was recreated; "
            f"the new endpoint lists {devices} devices"
        )
        results.append(CheckResult(RESTART_CHECK, name, Status.PASS, detail, waited))
    return results


def _with_exit(detail: str, process: PluginProcess | None) -> str:
    if process is None or process.exit_code() is None:
        return detail
    tail = process.log_tail(5).replace("\n", " | ")
    return f"{detail}; the plugin exited with code {process.exit_code()}" + (f": {tail}" if tail else "")
