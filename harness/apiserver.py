"""`ApiServerProcess`: the real `kubenode apiserver` as a subprocess, for tests of every part.

    with ApiServerProcess() as api:          # temp data dir, free port (--port 0), waits for /readyz
        api.url                               # "https://127.0.0.1:41234" (always TLS; api.ca_file)
        api.kubeconfig                        # admin kubeconfig path (system:masters)
        api.kubeconfig_for("system:node:n1", ["system:nodes"])   # a kubeconfig for any user
        api.token                             # the admin bearer token
        api.kill()                            # SIGKILL (a crash); api.restart() starts it again, same dir
        api.stop()                            # SIGTERM and wait
        api.request("GET", "/api/v1/pods")    # (status, decoded JSON) as admin; token="" sends none

Start-up raises RuntimeError with the server's output when it exits or is not ready within the
deadline. The data dir (a TemporaryDirectory unless `data_dir` is given) is removed by `close()`
(the context manager's exit). Extra flags go in `args` (e.g. ["--default-watch-cache-size", "50"]).
With KUBENODE_APISERVER_PROFILE=OUT in the environment, the server runs under harness/profiled.py
(cProfile, CPU time of every thread) and writes its profile to OUT when it stops.
"""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# How long a start may take before the harness gives up: generous, since a loaded 2-core machine
# (parallel test runs, benchmarks) has taken over 30 s to start a Python daemon; a healthy start
# returns as soon as it is ready, so the bound costs nothing.
START_DEADLINE = 90.0
PROFILE_ENV = "KUBENODE_APISERVER_PROFILE"  # a path: profile the server (see the module docstring)
_SERVING = re.compile(r"serving on (\S+)")


class ApiServerProcess:
    def __init__(
        self,
        data_dir: Path | None = None,
        args: Sequence[str] = (),
        *,
        port: int = 0,
        env: dict[str, str] | None = None,
    ) -> None:
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix="kubenode-apiserver-")
        self.data_dir: Path = data_dir if data_dir is not None else Path(self._tmp.name)  # type: ignore[union-attr]
        self.args = list(args)
        self.requested_port = port
        self.env = env
        self.process: subprocess.Popen[str] | None = None
        self.url = ""
        self.output: list[str] = []
        self._reader: threading.Thread | None = None
        self.start()

    # -- lifecycle ------------------------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "admin.kubeconfig"

    @property
    def token_file(self) -> Path:
        return self.data_dir / "tokens.csv"

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def command(self) -> list[str]:
        # Restarts reuse the first port, so clients (and kubeconfigs) keep working.
        port = self.port if self.url else self.requested_port
        profile = os.environ.get(PROFILE_ENV)
        runner = ["-m", "harness.profiled", profile, "--"] if profile else ["-m", "cli.main"]
        return [
            sys.executable, *runner, "apiserver",
            "--data-dir", str(self.data_dir), "--port", str(port), "--bind-address", "127.0.0.1",
            *self.args,
        ]  # fmt: skip

    def start(self) -> None:
        env = {**os.environ, **(self.env or {}), "PYTHONUNBUFFERED": "1"}
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        self.output = []
        self.process = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=REPO,
        )
        url_seen = threading.Event()

        def read(process: subprocess.Popen[str]) -> None:
            assert process.stdout is not None
            for line in process.stdout:
                self.output.append(line)
                match = _SERVING.search(line)
                if match and not url_seen.is_set():
                    self.url = match.group(1)
                    url_seen.set()

        self._reader = threading.Thread(target=read, args=(self.process,), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + START_DEADLINE
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self._reader.join(timeout=2)
                raise RuntimeError(f"kubenode apiserver exited with {self.process.returncode}:\n{self.log()}")
            if url_seen.is_set() and self._ready():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"kubenode apiserver not ready within {START_DEADLINE} s:\n{self.log()}")

    @property
    def ca_file(self) -> Path:
        return self.data_dir / "pki" / "ca.crt"

    def ssl_context(self) -> ssl.SSLContext:
        """Trusts the server's own CA (made on first start in <data_dir>/pki)."""
        return ssl.create_default_context(cafile=str(self.ca_file))

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                self.url + "/readyz", timeout=2, context=self.ssl_context()
            ) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def log(self) -> str:
        return "".join(self.output)

    def kill(self) -> None:
        """SIGKILL, as a crash would end it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not stop in time. Returns the exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self._reader is not None:
            self._reader.join(timeout=2)
        return self.process.returncode

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> ApiServerProcess:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    # -- raw requests -------------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        content_type: str = "application/json",
        token: str | None = None,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> tuple[int, Any]:
        """One HTTP request as admin (or `token`; "" for none): (status, decoded JSON body or text)."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        all_headers = {"Content-Type": content_type, **(headers or {})}
        bearer = self.token if token is None else token
        if bearer:
            all_headers["Authorization"] = f"Bearer {bearer}"
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=all_headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self.ssl_context()) as response:
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, payload = exc.code, exc.read()
        try:
            return status, json.loads(payload)
        except ValueError:
            return status, payload.decode(errors="replace")

    # -- credentials --------------------------------------------------------------------------------------

    @property
    def token(self) -> str:
        from apiserver.auth.tokens import token_for

        token = token_for(self.token_file, "admin")
        assert token is not None, f"no admin token in {self.token_file}"
        return token

    def token_for(self, user: str, groups: Sequence[str] = ()) -> str:
        """A bearer token for `user` (added to the token file; the server picks it up within ~1 s)."""
        from apiserver.auth.tokens import issue_token

        token = issue_token(self.token_file, user, list(groups))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # wait until the server's authenticator has reloaded the file
            request = urllib.request.Request(
                self.url + "/api/v1/namespaces/default", headers={"Authorization": f"Bearer {token}"}
            )
            try:
                urllib.request.urlopen(request, timeout=2, context=self.ssl_context()).close()
                return token
            except urllib.error.HTTPError as exc:
                if exc.code != 401:
                    return token
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"token for {user} not accepted within 10 s")

    def kubeconfig_for(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig (next to the admin one) authenticating as `user` in `groups`."""
        from apiserver.auth.kubeconfig import write_kubeconfig

        token = self.token_for(user, groups)
        path = self.data_dir / f"kubeconfig-{re.sub(r'[^A-Za-z0-9_.-]', '_', user)}"
        write_kubeconfig(path, self.url, token, self.ca_file.read_bytes(), user=user)
        return path
