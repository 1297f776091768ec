"""kubectl port-forward and attach through the real API server to a real agent, and the bad input around
exec and forwarding: each gets one clear error and both servers keep serving."""

from __future__ import annotations

import asyncio
import http.client
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from harness.agent import AgentProcess
from harness.apiserver import ApiServerProcess
from kubenode.kubeclient import PODS, KubeClient
from tests.agent_cluster.streams import NODE_IP, PortForward, container_running, free_port, kubectl, start_pod
from tests.agent_cluster.support import wait_until


def test_kubectl_port_forward_reaches_the_pods_server_and_only_its_ports(
    api: ApiServerProcess, admin: KubeClient, make_agent: Callable[..., AgentProcess]
) -> None:
    agent = make_agent(settings=NODE_IP).start()
    port, undeclared = free_port(), free_port()
    server = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", "/etc"]
    name = start_pod(admin, agent, "", "web", argv=server, ports=[{"containerPort": port}])
    try:
        wait_until(lambda: _accepts(port), 60, f"{name}'s HTTP server")
        forward = PortForward(api.kubeconfig, name, port)
        try:
            for _ in range(3):  # each request is a new forwarded connection (a new pair of streams)
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{forward.local}/hostname", timeout=30
                ) as answer:
                    assert answer.status == 200
                    assert answer.read() == Path("/etc/hostname").read_bytes()
        finally:
            forward.stop()
        # A port the pod neither declares nor listens on: refused with one line naming it; kubectl says so.
        forward = PortForward(api.kubeconfig, name, undeclared)
        try:
            with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
                urllib.request.urlopen(f"http://127.0.0.1:{forward.local}/", timeout=30)
        finally:
            err = forward.stop()
        assert f"error forwarding port {undeclared} to pod {name}" in err, err
        # The endpoint keeps serving: a new forward to the real port works.
        forward = PortForward(api.kubeconfig, name, port)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{forward.local}/hostname", timeout=30) as answer:
                assert answer.status == 200
        finally:
            forward.stop()
    finally:
        admin.delete(PODS, name, "default")


def _accepts(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_kubectl_attach_reaches_the_containers_stdin_and_output(
    api: ApiServerProcess, admin: KubeClient, make_agent: Callable[..., AgentProcess]
) -> None:
    agent = make_agent(settings=NODE_IP).start()
    name = start_pod(
        admin, agent, 'read line; echo "got $line"', "attach", stdin=True, restart_policy="Never"
    )
    try:
        rc, out, err = kubectl(api.kubeconfig, "attach", "-i", name, stdin="hello\n")
        assert (rc, out) == (0, "got hello\n"), err
        # The container is gone now: attaching again is one clear error.
        wait_until(lambda: not container_running(admin, name), 60, f"{name} stopped")
        rc, out, err = kubectl(api.kubeconfig, "attach", name)
        assert rc != 0 and "completed pod" in err, (rc, err)
        # stdin asked of a container without `stdin: true`: refused by name.
        other = start_pod(admin, agent, "exec sleep 600", "noin")
        try:
            rc, out, err = kubectl(api.kubeconfig, "attach", "-i", other, stdin="x\n")
            assert rc != 0 and "was not started with stdin: true" in err, (rc, err)
        finally:
            admin.delete(PODS, other, "default")
    finally:
        admin.delete(PODS, name, "default")


def test_exec_into_a_pod_not_running_and_by_another_node_gets_one_clear_error(
    api: ApiServerProcess, admin: KubeClient, make_agent: Callable[..., AgentProcess]
) -> None:
    agent = make_agent(settings=NODE_IP).start()
    name = start_pod(admin, agent, "exec sleep 600")
    # Runs long enough for its running state to reach the API before it exits and backs off.
    crashing = start_pod(admin, agent, "sleep 3; exit 1", "crash")
    try:
        # A container in its crash-loop back-off is not running: the API server says so by name.
        def backing_off() -> bool:
            statuses = admin.get(PODS, crashing, "default")["status"].get("containerStatuses") or []
            return bool(statuses) and "waiting" in statuses[0].get("state", {})

        wait_until(backing_off, 60, f"{crashing} backing off")
        rc, _, err = kubectl(api.kubeconfig, "exec", crashing, "--", "true")
        assert rc != 0 and f"container main in pod {crashing} is not running" in err, (rc, err)
        # Another node's credentials may not exec into this node's pod (RBAC: create pods/exec).
        other = api.kubeconfig_for("system:node:another-node", ["system:nodes"])
        rc, _, err = kubectl(other, "exec", name, "--", "id")
        assert rc != 0 and 'cannot create resource "pods/exec"' in err, (rc, err)
        # Both servers keep serving.
        assert kubectl(api.kubeconfig, "exec", name, "--", "true")[0] == 0
    finally:
        admin.delete(PODS, crashing, "default")
        admin.delete(PODS, name, "default")


def test_a_malformed_stream_ends_that_stream_only(
    api: ApiServerProcess, admin: KubeClient, make_agent: Callable[..., AgentProcess]
) -> None:
    agent = make_agent(settings=NODE_IP).start()
    name = start_pod(admin, agent, "exec sleep 600", ports=[{"containerPort": 9}])
    try:
        answers = asyncio.run(_malformed(api, name))
        # Garbage on a port-forward tunnel (not SPDY/3): the agent ends it with GOAWAY and closes.
        assert answers["portforward"][:4] == b"\x80\x03\x00\x07", answers
        # exec messages on unknown channels, a text message and a bad resize are ignored; the command
        # still runs and reports its exit code.
        assert b'"NonZeroExitCode"' in answers["exec"], answers
        # A channel protocol the agent does not speak: its refusal reaches the client as a Status.
        assert "v5.channel.k8s.io" in answers["v3"].decode(), answers
        rc, out, err = kubectl(api.kubeconfig, "exec", name, "--", "echo", "still serving")
        assert (rc, out) == (0, "still serving\n"), err
    finally:
        admin.delete(PODS, name, "default")


async def _malformed(api: ApiServerProcess, pod: str) -> dict[str, bytes]:
    context = ssl.create_default_context(cafile=str(api.ca_file))
    headers = {"Authorization": f"Bearer {api.token}"}
    base = api.url.replace("https://", "wss://") + f"/api/v1/namespaces/default/pods/{pod}"
    answers: dict[str, bytes] = {}
    async with aiohttp.ClientSession(headers=headers) as session:
        url = base + "/portforward"
        async with session.ws_connect(url, protocols=["SPDY/3.1+portforward.k8s.io"], ssl=context) as ws:
            await ws.send_bytes(b"\x80\x09\x00\x01\x00\x00\x00\x00")  # a control frame of SPDY version 9
            message = await ws.receive(timeout=30)
            answers["portforward"] = message.data if message.type == aiohttp.WSMsgType.BINARY else b""
        url = base + "/exec?command=sh&command=-c&command=read+x%3B+exit+5&stdin=true&stdout=true"
        async with session.ws_connect(url, protocols=["v5.channel.k8s.io"], ssl=context) as ws:
            await ws.send_bytes(b"\x07junk")  # no such channel
            await ws.send_str("text is not part of the protocol")
            await ws.send_bytes(b"\x04{not json")  # a resize that does not parse
            await ws.send_bytes(b"\x00line\n")
            errors = b""
            async for message in ws:
                if message.type == aiohttp.WSMsgType.BINARY and message.data[:1] == b"\x03":
                    errors += message.data[1:]
            answers["exec"] = errors
        upgrade = {
            "Connection": "Upgrade",
            "Upgrade": "websocket",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            "Sec-WebSocket-Protocol": "v3.channel.k8s.io",
        }
        url = api.url + f"/api/v1/namespaces/default/pods/{pod}/exec?command=true&stdout=true"
        async with session.get(url, headers=upgrade, ssl=context) as response:
            assert response.status == 400, response.status
            answers["v3"] = (await response.json())["message"].encode()
    return answers
