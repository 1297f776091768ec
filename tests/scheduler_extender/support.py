"""Helpers for extender tests: the extender as a real process, profiles, and a stub extender.

- `ExtenderProcess`: `kubenode scheduler extender --port 0` as a subprocess; `url` is read from
  its "serving on" line (printed once its informers have synced);
- `extender_profile(...)`: a KubeSchedulerConfiguration file whose `extenders:` entry calls it;
- `StubExtender`: a tiny HTTP server in a thread that records each request body and answers
  from a function, to check what our scheduler sends and how it uses the answers.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parents[2]
_SERVING = re.compile(r"serving on (\S+)")


class ExtenderProcess:
    def __init__(self, kubeconfig: Path | str, *args: str, deadline: float = 30.0) -> None:
        command = [
            sys.executable, "-m", "cli.main", "scheduler", "extender", "--kubeconfig", str(kubeconfig),
            "--bind-address", "127.0.0.1", "--port", "0", *args,
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: list[str] = []
        self.url = ""
        self._serving = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._serving.wait(deadline):
            self.stop()
            raise AssertionError(f"the extender did not start serving:\n{self.log()}")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            match = _SERVING.search(line)
            if match and not self.url:
                self.url = match.group(1)
                self._serving.set()
        self._serving.set()  # exited: stop waiting

    def log(self) -> str:
        return "".join(self.lines)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._reader.join(5)
        return self.proc.returncode


GPU = "kubenode.io/gpu"


def extender_entry(url: str, **fields: Any) -> dict[str, Any]:
    """kube's Extender config for our extender: all three verbs, GPUs managed and left to it."""
    entry: dict[str, Any] = {
        "urlPrefix": url,
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "bindVerb": "bind",
        "weight": 5,
        "httpTimeout": "5s",
        "nodeCacheCapable": True,
        "managedResources": [{"name": GPU, "ignoredByScheduler": True}],
        "ignorable": False,
    }
    entry.update(fields)
    return {k: v for k, v in entry.items() if v is not None}


def write_profile(path: Path, *extenders: dict[str, Any], scheduler_name: str = "default-scheduler") -> Path:
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": scheduler_name}],
        "extenders": list(extenders),
    }
    path.write_text(yaml.safe_dump(config))
    return path


Answer = Callable[[str, Any], tuple[int, Any]]  # (verb, request body) -> (status, response body)


class StubExtender:
    """Records (verb, body) of each POST and answers with `answer`."""

    def __init__(self, answer: Answer) -> None:
        self.requests: list[tuple[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                verb = self.path.rsplit("/", 1)[-1]
                stub.requests.append((verb, body))
                status, reply = answer(verb, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> StubExtender:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


def post(url: str, verb: str, body: Any, ca_file: Path | None = None) -> tuple[int, Any]:
    """POST a JSON body to url/verb (trusting ca_file for https); (status, decoded answer)."""
    import ssl
    import urllib.error
    import urllib.request

    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{url}/{verb}", data=data, headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        context = ssl.create_default_context(cafile=str(ca_file)) if ca_file else None
        with urllib.request.urlopen(request, timeout=10, context=context) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


PROBE_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": "default"},
             "spec": {"containers": [{"name": "c", "image": "pause"}]}}  # fmt: skip


def wait_until_known(url: str, names: list[str], timeout: float = 10.0, context: Path | None = None) -> None:
    """Until the extender's informer has every node (a filter names none as unknown)."""
    from tests.scheduler_live.support import wait_for

    def known() -> bool:
        status, answer = post(url, "filter", {"Pod": PROBE_POD, "NodeNames": names}, context)
        return status == 200 and not any(
            "not in the extender's cache" in reason
            for reason in (answer.get("FailedAndUnresolvableNodes") or {}).values()
        )

    wait_for(known, timeout, f"the extender to know nodes {names}")
