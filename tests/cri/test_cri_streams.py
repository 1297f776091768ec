"""kubectl exec, attach and port-forward into CRI pods: the real kubectl, the API server, the agent (which
asks containerd for a streaming URL and proxies the stream there as the kubelet does) and a real containerd.

The module's API server, containerd and agent are test_cri_pods.py's fixtures (conftest.py shares them),
started again for this module.
"""

from __future__ import annotations

import http.client
import os
import select
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness.agent import AgentProcess
from harness.containerd import ContainerdProcess
from kubenode.kubeclient import KubeClient
from tests.agent_cluster.streams import PortForward, free_port
from tests.agent_cluster.support import wait_until
from tests.apiserver.kubectl_support import Kubectl, kubectl_path
from tests.cri.test_cri_pods import apply, delete, image_pod, running


def _exec(kubectl: Kubectl, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return kubectl.run("exec", *args, check=False, timeout=60, stdin=stdin)


def test_kubectl_exec_passes_output_stdin_tty_and_the_exit_code(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, image_pod("cri-exec-it", agent.node, "sleep 600"))
    wait_until(lambda: running(admin, "cri-exec-it"), 60, "cri-exec-it Running")
    done = _exec(kubectl, "cri-exec-it", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    # kubectl's own last line, as with a kubelet: the status carried the code.
    assert (done.returncode, done.stdout) == (3, "out\n"), done
    assert done.stderr == "err\ncommand terminated with exit code 3\n", done.stderr
    done = _exec(kubectl, "cri-exec-it", "--", "hostname")
    assert done.returncode == 0 and done.stdout.strip(), done
    # stdin reaches the command, and its end (v5's close of stdin, a FIN to containerd) ends `cat`.
    done = _exec(kubectl, "-i", "cri-exec-it", "--", "cat", stdin="through containerd\n")
    assert (done.returncode, done.stdout) == (0, "through containerd\n"), done
    # With a terminal (`script` gives kubectl one): the command's stdin is a tty of kubectl's size. containerd
    # sets the size just after it starts the process (as with a kubelet), so the command waits to see one.
    size = "until /bin/busybox stty size 2>/dev/null; do :; done"
    line = f"{kubectl_path()} exec -it cri-exec-it -- sh -c '/bin/busybox tty; {size}; exit 4'"
    env = {**os.environ, "KUBECONFIG": str(kubectl.kubeconfig)}
    tty = subprocess.run(
        ["script", "-qec", f"stty cols 97 rows 31; {line}", "/dev/null"],
        capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert tty.returncode == 4, (tty.stdout, tty.stderr)
    assert "/dev/pts/" in tty.stdout and "31 97" in tty.stdout, tty.stdout
    # A container the pod does not have: one line naming it.
    done = _exec(kubectl, "cri-exec-it", "-c", "nosuch", "--", "true")
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done
    assert "nosuch" in done.stderr, done.stderr
    # A command the runtime cannot start: its error reaches kubectl, and exec keeps working.
    done = _exec(kubectl, "cri-exec-it", "--", "/no/such/binary")
    assert done.returncode != 0 and "/no/such/binary" in done.stderr, done
    assert _exec(kubectl, "cri-exec-it", "--", "true").returncode == 0
    delete(kubectl, admin, "cri-exec-it")


def _read_until(process: subprocess.Popen[str], wanted: str, timeout: float = 60) -> str:
    """kubectl's stdout until `wanted` shows (select on the pipe: an event, not a sleep)."""
    assert process.stdout is not None
    seen = ""
    fd = process.stdout.fileno()
    while wanted not in seen:
        ready, _, _ = select.select([fd], [], [], timeout)
        chunk = os.read(fd, 4096).decode() if ready else ""
        assert chunk, f"kubectl's output ended before {wanted!r}: {seen!r}"
        seen += chunk
    return seen


def test_kubectl_attach_reaches_a_containers_stdin_and_output(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, tmp_path: Path
) -> None:
    script = "echo waiting; while read line; do echo got $line; done; echo stdin closed"
    body = image_pod("cri-attach", agent.node, script, stdin=True, stdinOnce=True)
    body["spec"]["restartPolicy"] = "Never"
    apply(kubectl, tmp_path, body)
    wait_until(lambda: running(admin, "cri-attach"), 60, "cri-attach Running")
    attach = subprocess.Popen(
        [str(kubectl_path()), "--kubeconfig", str(kubectl.kubeconfig), "attach", "-i", "cri-attach"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert attach.stdin is not None
    try:
        attach.stdin.write("hello\n")
        attach.stdin.flush()
        _read_until(attach, "got hello")
        # stdinOnce: the end of this attach's stdin closes the container's; it ends, and so does attach.
        out, err = attach.communicate(timeout=60)  # closes kubectl's stdin first
        assert "stdin closed" in out and attach.returncode == 0, (out, err)
    finally:
        if attach.poll() is None:
            attach.kill()
            attach.communicate()
    # attach -i to a container started without stdin: one line saying so.
    apply(kubectl, tmp_path, image_pod("cri-no-stdin", agent.node, "sleep 600"))
    wait_until(lambda: running(admin, "cri-no-stdin"), 60, "cri-no-stdin Running")
    done = kubectl.run("attach", "-i", "cri-no-stdin", check=False, timeout=60, stdin="x\n")
    assert done.returncode == 1 and "was not started with stdin: true" in done.stderr, done
    for name in ("cri-attach", "cri-no-stdin"):
        delete(kubectl, admin, name)


def test_kubectl_port_forward_reaches_a_containers_server(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, tmp_path: Path
) -> None:
    port = free_port()
    serve = (
        "/bin/busybox mkdir -p /www && echo served by busybox > /www/index.html"
        f" && exec /bin/busybox httpd -f -p 127.0.0.1:{port} -h /www"
    )
    apply(kubectl, tmp_path, image_pod("cri-web", agent.node, serve, ports=[{"containerPort": port}]))
    wait_until(lambda: running(admin, "cri-web"), 60, "cri-web Running")
    wait_until(lambda: _accepts(port), 60, "busybox httpd listening")
    forward = PortForward(kubectl.kubeconfig, "cri-web", port)
    try:
        for _ in range(3):  # each request is a new forwarded connection (new SPDY streams)
            with urllib.request.urlopen(f"http://127.0.0.1:{forward.local}/", timeout=30) as answer:
                assert answer.read() == b"served by busybox\n"
    finally:
        forward.stop()
    # A port nothing listens on: containerd's error, on the forwarded connection's error stream, reaches
    # kubectl; the tunnel carried it unchanged.
    closed = free_port()
    forward = PortForward(kubectl.kubeconfig, "cri-web", closed)
    try:
        with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
            urllib.request.urlopen(f"http://127.0.0.1:{forward.local}/", timeout=30)
    finally:
        err = forward.stop()
    assert f"failed to connect to localhost:{closed}" in err, err
    delete(kubectl, admin, "cri-web")


def _accepts(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_a_runtime_that_is_gone_refuses_exec_and_port_forward_in_one_line_and_serves_when_back(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, containerd: ContainerdProcess, tmp_path: Path
) -> None:
    apply(kubectl, tmp_path, image_pod("cri-exec-gone", agent.node, "sleep 600"))
    wait_until(lambda: running(admin, "cri-exec-gone"), 60, "cri-exec-gone Running")
    containerd.stop()
    try:
        done = _exec(kubectl, "cri-exec-gone", "--", "true")
        assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done
        assert f"container runtime {containerd.endpoint}" in done.stderr, done.stderr
        assert "cannot exec in container main of pod cri-exec-gone" in done.stderr, done.stderr
        # port-forward: the tunnel opens, and each forwarded connection is told why, naming the runtime.
        forward = PortForward(kubectl.kubeconfig, "cri-exec-gone", free_port())
        try:
            with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
                urllib.request.urlopen(f"http://127.0.0.1:{forward.local}/", timeout=30)
        finally:
            err = forward.stop()
        assert "cannot forward ports to pod cri-exec-gone: container runtime unix://" in err, err
    finally:
        containerd.start(import_images=False)
    # The agent kept serving: once containerd is back (its shims kept the container), exec works again.
    done = wait_until(
        lambda: (d := _exec(kubectl, "cri-exec-gone", "--", "sh", "-c", "exit 5")).returncode == 5 and d,
        60,
        "exec through containerd again",
    )
    assert done.stderr == "command terminated with exit code 5\n", done.stderr
    delete(kubectl, admin, "cri-exec-gone")
