"""`kubectl exec` and `kubectl logs` through the real API server to a real agent's authenticated endpoint.

The agent gets its serving certificate from a kubelet-serving CSR when it joins; the API server reaches it
with its kubelet client certificate; the agent authorizes each caller with a SubjectAccessReview.
"""

from __future__ import annotations

import os
import ssl
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from kubenode.kubeclient import NODES, PODS, KubeClient
from kubenode.nodeendpoints import node_daemon_endpoint
from tests.agent_cluster.streams import NODE_IP, kubectl, start_pod
from tests.apiserver.kubectl_support import kubectl_path


@pytest.fixture
def running(
    api: ApiServerProcess, admin: KubeClient, make_agent: Callable[..., AgentProcess]
) -> Iterator[tuple[AgentProcess, str]]:
    agent = make_agent(settings=NODE_IP).start()
    env = [{"name": "GREETING", "value": "hello from the pod"}]
    name = start_pod(admin, agent, "echo started; exec sleep 600", env=env, workingDir="/tmp")
    yield agent, name
    admin.delete(PODS, name, "default")


def test_kubectl_exec_runs_in_the_container_with_its_env_cgroup_and_exit_code(
    api: ApiServerProcess, running: tuple[AgentProcess, str]
) -> None:
    agent, pod = running
    rc, out, err = kubectl(
        api.kubeconfig, "exec", pod, "--", "sh", "-c", 'echo "$GREETING in $(pwd)"; echo oops >&2'
    )
    assert rc == 0, err
    assert out == "hello from the pod in /tmp\n" and err == "oops\n", (out, err)
    rc, out, err = kubectl(api.kubeconfig, "exec", pod, "--", "sh", "-c", "exit 3")
    assert rc == 3, (rc, out, err)
    # Inside the pod cgroup: the same cgroups as the container's process, and a cpuset from it.
    rc, out, err = kubectl(api.kubeconfig, "exec", pod, "--", "cat", "/proc/self/cgroup", "/proc/self/status")
    assert rc == 0, err
    cpuset_line = next(line for line in out.splitlines() if ":cpuset:" in line)
    pod_cgroup = cpuset_line.split(":", 2)[2]
    assert pod_cgroup.startswith(agent.root + "/"), (agent.root, out)
    allowed = next(line for line in out.splitlines() if line.startswith("Cpus_allowed_list:"))
    cpus = Path(f"/sys/fs/cgroup/cpuset{pod_cgroup}/cpuset.cpus").read_text().strip()
    assert allowed.split(":", 1)[1].strip() == cpus, (allowed, cpus)
    # stdin reaches the command; its end closes the command's input.
    rc, out, err = kubectl(api.kubeconfig, "exec", "-i", pod, "--", "tr", "a-z", "A-Z", stdin="shout\n")
    assert (rc, out) == (0, "SHOUT\n"), err
    # A command that cannot run: one clear error, and the endpoint keeps serving.
    rc, out, err = kubectl(api.kubeconfig, "exec", pod, "--", "/no/such/binary")
    assert rc != 0 and "/no/such/binary" in err, (rc, err)
    assert kubectl(api.kubeconfig, "exec", pod, "--", "true")[0] == 0


def test_kubectl_exec_with_a_tty(api: ApiServerProcess, running: tuple[AgentProcess, str]) -> None:
    _, pod = running
    # `script` gives kubectl a terminal, so -t is honoured and the command's stdin is a tty.
    line = f"{kubectl_path()} exec -it {pod} -- sh -c 'tty; stty size; exit 4'"
    env = {**os.environ, "KUBECONFIG": str(api.kubeconfig), "COLUMNS": "97", "LINES": "31"}
    done = subprocess.run(
        ["script", "-qec", f"stty cols 97 rows 31; {line}", "/dev/null"],
        capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 4, (done.stdout, done.stderr)
    assert "/dev/pts/" in done.stdout, done.stdout
    assert "31 97" in done.stdout, done.stdout


def test_kubectl_logs_reach_the_agent_over_tls(
    api: ApiServerProcess, running: tuple[AgentProcess, str]
) -> None:
    _, pod = running
    rc, out, err = kubectl(api.kubeconfig, "logs", pod)
    assert (rc, out) == (0, "started\n"), err


def test_the_daemon_endpoint_wants_the_api_servers_certificate(
    api: ApiServerProcess, admin: KubeClient, running: tuple[AgentProcess, str]
) -> None:
    agent, pod = running
    address = node_daemon_endpoint(admin.get(NODES, agent.node))
    assert address is not None
    url = f"https://{address}/exec/default/{pod}/main?command=id&stdout=1"
    ca = ssl.create_default_context(cafile=str(api.ca_file))
    # No client certificate: 401, even with the headers a captured request carried.
    request = urllib.request.Request(url, headers={"Authorization": "Bearer kn1.e30.AAAA"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, context=ca, timeout=10)
    assert caught.value.code == 401
    # Another node's identity (a certificate the cluster CA signed for it): 403 from the review.
    other = _node_client_context(api, "system:node:another", ca)
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(url, context=other, timeout=10)
    assert caught.value.code == 403
    assert "user=system:node:another" in caught.value.read().decode()


def test_exec_takes_the_stream_names_kube_apiserver_gives_the_kubelet(
    api: ApiServerProcess, admin: KubeClient, running: tuple[AgentProcess, str]
) -> None:
    """kube-apiserver proxies an exec to the kubelet with `input`, `output`, `error`, `tty` = "1" (not
    kubectl's stdin/stdout/stderr=true, which kubenode apiserver passes on): the agent read only the latter,
    so `kubectl exec` through kube-apiserver 1.37 ran the command and printed nothing (docs/interop.md)."""
    import asyncio

    import aiohttp

    agent, pod = running
    address = node_daemon_endpoint(admin.get(NODES, agent.node))
    assert address is not None
    context = _node_client_context(api, "kube-apiserver-kubelet-client", ssl.create_default_context(),
                                   groups=["system:masters"])  # fmt: skip
    command = ["sh", "-c", "echo out; echo err >&2; exit 3"]
    query = urllib.parse.urlencode([*(("command", c) for c in command), ("output", "1"), ("error", "1")])
    url = f"wss://{address}/exec/default/{pod}/main?{query}"

    async def run() -> dict[int, bytes]:
        got: dict[int, bytes] = {}
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(url, ssl=context, protocols=["v5.channel.k8s.io"]) as ws,
        ):
            async for message in ws:
                if message.type == aiohttp.WSMsgType.BINARY and message.data[:1] != b"\xff":
                    got[message.data[0]] = got.get(message.data[0], b"") + message.data[1:]
        return got

    got = asyncio.run(asyncio.wait_for(run(), 30))
    assert got.get(1) == b"out\n" and got.get(2) == b"err\n", got
    assert b"NonZeroExitCode" in got.get(3, b""), got


def _node_client_context(
    api: ApiServerProcess, user: str, base: ssl.SSLContext, groups: list[str] | None = None
) -> ssl.SSLContext:
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    pki = api.data_dir / "pki"
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    ca_cert = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in (groups or ["system:nodes"])),
            x509.NameAttribute(NameOID.COMMON_NAME, user),
        ]
    )
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1)).sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    where = api.data_dir / f"client-{int(time.time() * 1e6)}"
    where.mkdir()
    (where / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (where / "tls.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    context = ssl.create_default_context(cafile=str(api.ca_file))
    context.load_cert_chain(str(where / "tls.crt"), str(where / "tls.key"))
    return context


def test_kubectl_exec_runs_as_the_containers_user(
    api: ApiServerProcess, admin: KubeClient, make_agent: Callable[..., AgentProcess]
) -> None:
    agent = make_agent(settings=NODE_IP).start()
    context = {"runAsUser": 1234, "runAsGroup": 2345}
    name = start_pod(admin, agent, "exec sleep 600", "user", securityContext=context)
    try:
        rc, out, err = kubectl(api.kubeconfig, "exec", name, "--", "sh", "-c", "id -u; id -g")
        assert (rc, out) == (0, "1234\n2345\n"), err
    finally:
        admin.delete(PODS, name, "default")


def test_kubectl_exec_sees_the_containers_volumes(
    api: ApiServerProcess, admin: KubeClient, make_agent: Callable[..., AgentProcess]
) -> None:
    agent = make_agent(settings=NODE_IP).start()
    mount = f"/mnt/kn-exec-{uuid.uuid4().hex[:6]}"  # exists only in the container's mount namespace
    name = start_pod(
        admin,
        agent,
        f"echo from the volume > {mount}/note; exec sleep 600",
        "vol",
        volumeMounts=[{"name": "scratch", "mountPath": mount}],
        workingDir=mount,
        pod_volumes=[{"name": "scratch", "emptyDir": {}}],
    )
    try:
        rc, out, err = kubectl(api.kubeconfig, "exec", name, "--", "sh", "-c", "pwd; cat note")
        assert (rc, out) == (0, f"{mount}\nfrom the volume\n"), err
        assert not Path(mount).exists()
    finally:
        admin.delete(PODS, name, "default")
