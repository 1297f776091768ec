"""Our scheduler calling our extender over HTTP, both real processes, against `kubenode apiserver`."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubenode.kubeclient import EVENTS, PODS, KubeClient
from tests.scheduler_extender.support import (
    GPU,
    PROBE_POD,
    ExtenderProcess,
    extender_entry,
    post,
    wait_until_known,
    write_profile,
)
from tests.scheduler_live.support import (
    BindingWatch,
    SchedulerProcess,
    bound_count,
    check_no_overcommit,
    create_all,
    empty_the_cluster,
    node,
    pod,
    wait_for,
)


@pytest.fixture(autouse=True)
def empty_cluster(admin: KubeClient) -> Iterator[None]:
    yield
    empty_the_cluster(admin)


@contextlib.contextmanager
def scheduler(apiserver: Any, profile: Path, tmp_path: Path) -> Iterator[SchedulerProcess]:
    process = SchedulerProcess(
        apiserver.kubeconfig, "--profile", str(profile), log_path=tmp_path / "sched.log"
    )
    try:
        yield process
    except BaseException:
        process.stop()
        print(f"scheduler log:\n{process.log()}")  # shown with the failure
        raise
    code = process.stop()
    assert code == 0, process.log()


def gpu_pod(name: str, gpus: int = 1) -> dict[str, Any]:
    return pod(name, extra={GPU: str(gpus)})


def closed_port_url() -> str:
    """A URL nothing listens on (the port was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def failed_scheduling(admin: KubeClient, name: str) -> list[str]:
    events = admin.list_all(EVENTS, namespace="default")[0]
    return [
        e.get("message", "")
        for e in events
        if e.get("reason") == "FailedScheduling" and e["involvedObject"].get("name") == name
    ]


@pytest.mark.parametrize("node_cache_capable", [True, False], ids=["nodeCacheCapable", "fullNodes"])
def test_gpu_pods_bind_through_the_extender_without_overcommit(
    apiserver: Any, admin: KubeClient, extender: ExtenderProcess, tmp_path: Path, node_cache_capable: bool
) -> None:
    profile = write_profile(
        tmp_path / "profile.yaml", extender_entry(extender.url, nodeCacheCapable=node_cache_capable)
    )
    create_all(admin, [node(f"g{i}", **{GPU: "2"}) for i in range(3)])
    # The extender's informer must have them before it is asked (it would fail unknown nodes).
    wait_until_known(extender.url, ["g0", "g1", "g2"])
    with BindingWatch(admin) as watch, scheduler(apiserver, profile, tmp_path) as sched:
        create_all(admin, [gpu_pod(f"gpu-{i}") for i in range(8)] + [pod("plain")])
        # 6 GPUs for 8 one-GPU pods: 6 bind, the plain pod binds too, 2 wait.
        wait_for(lambda: bound_count(admin) == 7, 30, "7 pods bound")
        waiting = [p["metadata"]["name"] for p in admin.list_all(PODS)[0] if not p["spec"].get("nodeName")]
        assert len(waiting) == 2 and all(n.startswith("gpu-") for n in waiting)
        # Our scheduler leaves the GPUs to the extender (ignoredByScheduler): the reason is its.
        # (A pod may first see "Binding rejected": the extender refuses a /bind that no longer fits,
        # when the /filter of the next pod came before the /bind of the one before.)
        fit_error = f"0/3 nodes are available: 3 Insufficient {GPU}."

        def reported(name: str) -> bool:
            return any(m.startswith(fit_error) for m in failed_scheduling(admin, name))

        wait_for(lambda: all(reported(name) for name in waiting), 15, f"FailedScheduling {fit_error!r}")
        check_no_overcommit(admin)
        watch.assert_bound_at_most_once()
        failed_binds = [line for line in sched.log().splitlines() if "binding default/" in line]
        assert all("no longer fits node" in line for line in failed_binds), failed_binds
    binds = [line for line in extender.lines if " bound default/gpu-" in line]
    bound_gpu = {p["metadata"]["name"] for p in admin.list_all(PODS)[0] if p["spec"].get("nodeName")} - {
        "plain"
    }
    assert {line.split()[-3].split("/")[1] for line in binds} >= bound_gpu, extender.log()
    assert not any(" bound default/plain " in line for line in extender.lines), "plain pods bind by us"


def test_an_ignorable_extender_that_is_down_is_skipped(
    apiserver: Any, admin: KubeClient, tmp_path: Path
) -> None:
    down = extender_entry(closed_port_url(), ignorable=True, bindVerb=None, managedResources=[{"name": GPU}])
    profile = write_profile(tmp_path / "profile.yaml", down)
    create_all(admin, [node("g0", **{GPU: "2"}), gpu_pod("gpu-0")])
    with scheduler(apiserver, profile, tmp_path):
        wait_for(lambda: bound_count(admin) == 1, 20, "the GPU pod bound without the extender")


def test_a_non_ignorable_extender_that_is_down_fails_the_cycle(
    apiserver: Any, admin: KubeClient, tmp_path: Path
) -> None:
    url = closed_port_url()
    profile = write_profile(tmp_path / "profile.yaml", extender_entry(url, httpTimeout="2s"))
    create_all(admin, [node("g0", **{GPU: "2"}), gpu_pod("gpu-0"), pod("plain")])
    with scheduler(apiserver, profile, tmp_path):
        # The extender manages GPUs only: a pod without one is not its business and binds.
        wait_for(lambda: bound_count(admin) == 1, 20, "the plain pod bound")
        message = wait_for(lambda: failed_scheduling(admin, "gpu-0"), 20, "FailedScheduling for gpu-0")[0]
        assert message.startswith(f"extender {url}/filter: "), message
        assert "refused" in message.lower(), message
        status = admin.get(PODS, "gpu-0", "default")
        assert not status["spec"].get("nodeName")
        conditions = {c["type"]: c for c in status["status"].get("conditions", [])}
        assert conditions["PodScheduled"]["status"] == "False"
        assert conditions["PodScheduled"]["reason"] == "SchedulerError"


def test_the_extender_serves_https_and_our_scheduler_calls_it_with_tls_config(
    apiserver: Any, admin: KubeClient, tmp_path: Path
) -> None:
    from apiserver.auth.pki import ensure_serving_cert
    from kubenode.model.parse import parse_pod
    from scheduler.extenders import HttpExtender
    from scheduler.profile import parse_configuration

    cert = ensure_serving_cert(tmp_path, ["127.0.0.1"])
    create_all(admin, [node("g0", **{GPU: "1"})])
    tls = ExtenderProcess(
        apiserver.kubeconfig,
        "--tls-cert-file",
        str(cert.cert_path),
        "--tls-private-key-file",
        str(cert.key_path),
    )
    try:
        assert tls.url.startswith("https://127.0.0.1:")
        entry = extender_entry(tls.url, enableHTTPS=True, tlsConfig={"caFile": str(cert.ca_path)})
        (config,) = parse_configuration({"extenders": [entry]}, "profile.yaml").extenders
        extender = HttpExtender(config)
        wait_until_known(tls.url, ["g0"], context=cert.ca_path)
        passed, failed, _ = extender.filter(parse_pod(gpu_pod("p")), ["g0"], list)
        assert passed == ["g0"] and not failed
        extender.close()
    finally:
        assert tls.stop() == 0, tls.log()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tls-cert-file", "/nonexistent.crt"], "--tls-cert-file and --tls-private-key-file go together"),
        (["--tls-cert-file", "/no.crt", "--tls-private-key-file", "/no.key"], "--tls-cert-file"),
        (["--port", "70000"], "--port 70000 is not a port number"),
    ],
)
def test_bad_extender_flags_exit_2_with_one_line(apiserver: Any, flags: list[str], message: str) -> None:
    import subprocess
    import sys

    kubeconfig = apiserver.kubeconfig
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "scheduler",
            "extender",
            "--kubeconfig",
            str(kubeconfig),
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_an_address_in_use_exits_1_with_one_line(apiserver: Any) -> None:
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "cli.main", "scheduler", "extender", "--kubeconfig",
             str(apiserver.kubeconfig), "--bind-address", "127.0.0.1", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("kubenode scheduler:")]
    assert lines == [lines[0]] and f"cannot serve on 127.0.0.1:{port}" in lines[0], done.stderr


def test_over_http_malformed_bodies_get_400_and_unknown_nodes_a_failure_entry(
    extender: ExtenderProcess,
) -> None:
    status, body = post(extender.url, "filter", b"{not json")
    assert status == 400 and "not JSON" in body["Error"]
    status, body = post(extender.url, "bind", {"PodName": 3})
    assert status == 400 and "ExtenderBindingArgs" in body["Error"]
    status, body = post(extender.url, "filter", {"Pod": PROBE_POD, "NodeNames": ["nowhere"]})
    assert status == 200 and body["NodeNames"] == []
    assert body["FailedAndUnresolvableNodes"] == {"nowhere": "node 'nowhere' is not in the extender's cache"}
    status, body = post(extender.url, "prioritize", {"Pod": PROBE_POD, "NodeNames": ["nowhere"]})
    assert status == 200 and body == [{"Host": "nowhere", "Score": 0}]
