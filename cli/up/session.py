"""One `kubenode up` run: start the cluster, hand over the kubeconfig, apply the pods, show them, stop.

SIGINT and SIGTERM end the wait (the children run in their own sessions, so a terminal's Ctrl-C reaches
`up` alone, which then stops them in reverse order). The table is read once a second: the API's pods, the
agent's /pods and, where a GPU plugin runs, one scrape of its /metrics (the GPU columns); on a terminal it
is redrawn in place when it changes, piped each changed row is printed as one line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from cli.agentstatus import agent_pods, endpoint_of
from cli.up import gpuusage
from cli.up.apply import Applied, ManifestError, apply_object, read_manifests
from cli.up.cluster import Cluster, Options, StartError, example
from cli.up.table import SETTLED_PHASES, agent_views, pod_key, render, rows, shortfalls
from kubenode.kubeclient import PODS, KubeClient, KubeError

REFRESH_S = 1.0
# --once: after every pod settled, how long a shortfall may take to clear (limits are read on the next poll).
SETTLE_GRACE_S = 10.0


def say(line: str) -> None:
    """Print, but never let a closed stdout (`kubenode up | head`) stop the clean-up: output then goes
    nowhere, and the stop still runs."""
    try:
        print(line, flush=True)
    except (BrokenPipeError, OSError):
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class Session:
    def __init__(self, args: argparse.Namespace, data_dir: Path) -> None:
        self.args = args
        self.stop_requested = threading.Event()
        self.cluster = Cluster(
            Options(
                data_dir=data_dir,
                cgroup_root=args.cgroup_root,
                port=args.port,
                plugin_config=args.plugin_config.resolve() if args.plugin_config else None,
                container_runtime_endpoint=args.container_runtime_endpoint or "",
            ),
            progress=lambda line: say(f"kubenode up: {line}"),
        )

    def run(self) -> int:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)
        try:
            try:
                pods_dir = self.args.pods or example("pods")
                manifests = read_manifests(pods_dir)
            except (ManifestError, StartError, OSError) as exc:
                print(f"kubenode up: {exc}", file=sys.stderr)
                return 2
            try:
                self.cluster.start()
            except StartError as exc:
                print(f"kubenode up: {exc}", file=sys.stderr)
                return 1
            say(f"\nexport KUBECONFIG={self.cluster.kubeconfig}\n")
            client = self.cluster.client
            assert client is not None
            configmaps = [m for _, m in manifests if m.get("kind") == "ConfigMap"]
            for item in [apply_object(client, manifest) for manifest in configmaps]:
                say(f"configmap/{item.name} {item.outcome}")
            pods = [m for _, m in manifests if m.get("kind") == "Pod"]
            applied = [apply_object(client, manifest) for manifest in pods]
            for item in applied:
                say(f"pod/{item.name} {item.outcome}")
            if self.args.once:
                return self._once(client, applied)
            self._watch(client)
            return 0
        except KubeError as exc:
            print(f"kubenode up: {exc}", file=sys.stderr)
            return 1
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the stop short
            say("")
            self.cluster.stop()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.stop_requested.set()
        self.cluster.interrupted.set()

    # -- reading ------------------------------------------------------------------------------------------

    def _gpu_usage(self) -> dict[tuple[str, str], gpuusage.GpuUsage] | None:
        """One scrape of the GPU plugin's /metrics; None (no GPU columns) when no gpu backend runs."""
        url = self.cluster.gpu_metrics_url
        return gpuusage.scrape(url) if url else None

    def _snapshot(self, client: KubeClient) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        pods, _ = client.list_all(PODS)
        status: dict[str, Any] = {}
        try:
            address = endpoint_of(client, self.cluster.node)
            if address:
                status = agent_pods(address)
        except (KubeError, OSError, ValueError):
            pass  # the agent restarting: the API's half of the table still shows
        return pods, status

    # -- --once -------------------------------------------------------------------------------------------

    def _once(self, client: KubeClient, applied: list[Applied]) -> int:
        wanted = {(a.namespace, a.name) for a in applied}
        deadline = time.monotonic() + self.args.timeout
        settled_at: float | None = None
        while True:
            pods, status = self._snapshot(client)
            mine = [p for p in pods if pod_key(p) in wanted]
            views = agent_views(status)
            problems = {pod_key(p): shortfalls(p, views.get(pod_key(p))) for p in mine}
            settled = len(mine) == len(wanted) and all(
                (p.get("status") or {}).get("phase") in SETTLED_PHASES for p in mine
            )
            now = time.monotonic()
            if settled and settled_at is None:
                settled_at = now
            done = settled and (not any(problems.values()) or now - (settled_at or now) > SETTLE_GRACE_S)
            if done or now > deadline or self.stop_requested.is_set() or self.cluster.dead():
                break
            time.sleep(0.25)
        gpu = self._gpu_usage()
        say(render(rows(mine, status, gpu), gpu_columns=gpu is not None))
        missing = sorted(wanted - {pod_key(p) for p in mine})
        failed = {key: found for key, found in problems.items() if found}
        for namespace, name in missing:
            print(f"kubenode up: pod {namespace}/{name}: not found", file=sys.stderr)
        for (namespace, name), found in sorted(failed.items()):
            print(f"kubenode up: pod {namespace}/{name}: {'; '.join(found)}", file=sys.stderr)
        for child in self.cluster.dead():
            print(f"kubenode up: {child.name} exited with {child.exited()}:\n{child.tail()}", file=sys.stderr)
        if not settled and not failed:
            print(f"kubenode up: pods not settled within {self.args.timeout:.0f} s", file=sys.stderr)
        ok = settled and not failed and not missing and not self.cluster.dead()
        got = len(mine) - len(failed)
        say(f"kubenode up: {got}/{len(wanted)} pods got what they asked for")
        return 0 if ok else 1

    # -- live table ---------------------------------------------------------------------------------------

    def _watch(self, client: KubeClient) -> None:
        terminal = sys.stdout.isatty()
        say("kubenode up: running; Ctrl-C stops everything")
        shown: list[str] = []
        previous_rows: set[tuple[str, ...]] = set()
        while not self.stop_requested.is_set():
            for child in self.cluster.dead():
                print(f"kubenode up: {child.name} exited with {child.exited()}:", file=sys.stderr)
                print(child.tail(), file=sys.stderr)
                return
            try:
                pods, status = self._snapshot(client)
            except KubeError:
                self.stop_requested.wait(REFRESH_S)
                continue
            gpu = self._gpu_usage()
            table_rows = rows(pods, status, gpu)
            if terminal:
                lines = render(table_rows, gpu_columns=gpu is not None).splitlines()
                if lines != shown:
                    # Up over the previous table and clear to the end of the screen: redrawn in place.
                    sys.stdout.write(f"\x1b[{len(shown)}F\x1b[J" if shown else "")
                    sys.stdout.write("\n".join(lines) + "\n")
                    sys.stdout.flush()
                    shown = lines
            else:
                # One line per changed row, aligned as the whole table is now; the header once, first.
                lines = render(table_rows, gpu_columns=gpu is not None).splitlines()
                changed = [
                    line for row, line in zip(table_rows, lines[1:], strict=True) if row not in previous_rows
                ]
                if changed and not previous_rows:
                    say("         " + lines[0])
                for line in changed:
                    say(time.strftime("%H:%M:%S ") + line)
                previous_rows = set(table_rows)
            self.stop_requested.wait(REFRESH_S)
