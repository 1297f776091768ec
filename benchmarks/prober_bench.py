"""The prober's cost: a real `kubenode agent` running 110 pods with three probes each at periodSeconds 1.

Prints, for the same agent build on this machine's real cgroup v1 hierarchy (needs root):
- the agent's CPU (its own and its reaped children's: exec probes) as % of one core over a window with
  110 pods and no probes (the baseline),
- the same with each pod's startup probe (exec `true`: runs until it passes), readiness probe (httpGet on
  a server this script runs) and liveness probe (tcpSocket) at periodSeconds 1 [goal < 10%],
- the probes per second actually run in that window (from prober_probe_total), to show they ran,
- the same again with the liveness probe an exec (110 processes started per second), the worst case.
Every cgroup, process and file it makes is removed at the end.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import psutil
import yaml
from benchstats import report

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # harness/ lives at the repository root

from harness.cgroupfs import sweep_root

PODS = 110
WINDOW_S = 15.0
SETTLE_S = 3.0
REPO = Path(__file__).resolve().parents[1]
_PROBES = re.compile(r'^prober_probe_total\{[^}]*result="(successful|failed|unknown)"[^}]*\} (\S+)$', re.M)


class _Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a probe that timed out on a loaded machine closed its end: not the benchmark's business


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pod_doc(i: int, probes: str, port: int) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "command": ["sleep", "infinity"]}
    if probes != "none":
        liveness: dict[str, Any] = {"tcpSocket": {"port": port}}
        if probes == "exec":
            liveness = {"exec": {"command": ["true"]}}
        container["startupProbe"] = {"exec": {"command": ["true"]}, "periodSeconds": 1}
        container["readinessProbe"] = {"httpGet": {"port": port, "path": "/ready"}, "periodSeconds": 1}
        container["livenessProbe"] = {**liveness, "periodSeconds": 1}
    spec = {"containers": [container]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"}, "spec": spec}


def probes_run(listen: str) -> float:
    with urllib.request.urlopen(f"http://{listen}/metrics", timeout=5) as response:
        text = response.read().decode()
    return sum(float(value) for _, value in _PROBES.findall(text))


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system + times.children_user + times.children_system)


def measure(work: Path, probes: str, port: int) -> tuple[float, float]:
    """(agent CPU % of one core, probes run per second) over the window, once all pods run."""
    root = f"/kn-probe-bench-{uuid.uuid4().hex[:8]}"
    manifests, state = work / probes / "manifests", work / probes / "state"
    manifests.mkdir(parents=True)
    for i in range(PODS):
        (manifests / f"p{i}.yaml").write_text(yaml.safe_dump(pod_doc(i, probes, port)))
    listen = f"127.0.0.1:{free_port()}"
    argv = [sys.executable, "-m", "cli.main", "--log-level", "WARNING", "agent"]
    argv += ["--manifests", str(manifests), "--state-dir", str(state), "--cgroup-root", root]
    argv += ["--device-plugin-dir", "none"]
    argv += ["--node-name", "bench", "--listen", listen]
    agent = subprocess.Popen(argv, cwd=REPO)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                with urllib.request.urlopen(f"http://{listen}/pods", timeout=5) as response:
                    items = json.loads(response.read())["items"]
                if len(items) == PODS and all(i["status"]["phase"] == "Running" for i in items):
                    break
            time.sleep(0.2)
        else:
            raise SystemExit(f"the agent did not run {PODS} pods within 120 s")
        time.sleep(SETTLE_S)  # startup probes pass, the first syncs' work is done: the steady state
        proc = psutil.Process(agent.pid)
        probes_before, cpu_before, started = probes_run(listen), cpu_seconds(proc), time.monotonic()
        time.sleep(WINDOW_S)
        cpu_after, elapsed = cpu_seconds(proc), time.monotonic() - started
        probes_after = probes_run(listen)
        return 100.0 * (cpu_after - cpu_before) / elapsed, (probes_after - probes_before) / elapsed
    finally:
        agent.terminate()
        try:
            agent.wait(15)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
        left = sweep_root(root, attempts=100, retry_delay=0.01)
        if left:
            print(f"warning: could not remove {left}", file=sys.stderr)


def main() -> int:
    if os.geteuid() != 0:
        print("prober_bench needs root (real cgroups)", file=sys.stderr)
        return 1
    server = _Server(("127.0.0.1", 0), _Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    work = Path(tempfile.mkdtemp(prefix="kn-probe-bench-"))
    try:
        load = os.getloadavg()[0]
        baseline, _ = measure(work, "none", port)
        report(f"agent CPU, {PODS} pods, no probes", baseline, "% core")
        probed, rate = measure(work, "mixed", port)
        report(f"agent CPU, {PODS} pods x 3 probes (http/tcp/exec)", probed, "% core", "< 10%")
        report("probes run per second in that window", rate, "/s")
        report("probe cost over the baseline", probed - baseline, "% core")
        worst, worst_rate = measure(work, "exec", port)
        report(f"agent CPU, {PODS} pods, liveness exec each second", worst, "% core")
        report("probes run per second in that window", worst_rate, "/s")
        report("load average (1 min) at the start", load, "")
    finally:
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
