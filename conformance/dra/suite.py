"""Run the DRA checks against a driver started by a shell command.

Flow: fresh directories (registry, plugins, cdi) under /tmp -> the embedded API server (apiserver.py) ->
the driver's command, with `REGISTRY_DIR`, `PLUGIN_DIR`, `CDI_DIR`, `KUBECONFIG` and `NODE_NAME` in its
environment (e.g. `kubenode dra-driver --registry-dir "$REGISTRY_DIR" --plugin-dir "$PLUGIN_DIR"
--cdi-dir "$CDI_DIR" --kubeconfig "$KUBECONFIG" --node-name "$NODE_NAME"`) -> the checks in order
(checks.py), each one result line -> the driver, the API server and the directories removed.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from conformance.dra.apiserver import EmbeddedApiServer
from conformance.dra.checks import CHECKS
from conformance.dra.target import DraDirs, DraTarget, DraWaits
from conformance.process import PluginProcess
from conformance.results import CheckResult, Status
from conformance.target import Fail, Skip

NODE = "conformance-node"


def run_dra_suite(
    command: str, waits: DraWaits | None = None, emit: Callable[[CheckResult], None] = lambda r: None
) -> list[CheckResult]:
    root = Path(tempfile.mkdtemp(prefix="kn-conf-dra-", dir="/tmp"))
    dirs = DraDirs(root / "registry", root / "plugins", root / "cdi")
    for d in (dirs.registry, dirs.plugins, dirs.cdi):
        d.mkdir()
    api = EmbeddedApiServer()
    process: PluginProcess | None = None
    client = None
    results: list[CheckResult] = []
    try:
        api.start()
        from kubenode.kubeclient.client import KubeClient
        from kubenode.kubeclient.config import load

        client = KubeClient(load(api.kubeconfig))
        env = {
            "REGISTRY_DIR": str(dirs.registry),
            "PLUGIN_DIR": str(dirs.plugins),
            "CDI_DIR": str(dirs.cdi),
            "KUBECONFIG": str(api.kubeconfig),
            "NODE_NAME": NODE,
        }
        process = PluginProcess(command, root, env)
        process.start()
        target = DraTarget(dirs, NODE, client, waits or DraWaits())
        memo: dict[str, Any] = {}
        for check in CHECKS:
            started = time.monotonic()
            try:
                status, detail = Status.PASS, check.run(target, memo)
            except Fail as err:
                status, detail = Status.FAIL, str(err)
            except Skip as err:
                status, detail = Status.SKIP, str(err)
            except Exception as err:  # a check must never take the suite down
                status, detail = Status.FAIL, f"check raised {err!r}"
            if status is Status.FAIL and process.exit_code() is not None:
                detail += f" (the driver exited with {process.exit_code()}: {process.log_tail(3)})"
            result = CheckResult(check.name, target.driver, status, detail, time.monotonic() - started)
            results.append(result)
            emit(result)
    finally:
        if process is not None:
            process.stop()
        if client is not None:
            client.close()
        api.stop()
        shutil.rmtree(root, ignore_errors=True)
    return results
