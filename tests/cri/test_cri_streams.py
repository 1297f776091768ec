"""kubectl exec, attach and port-forward into CRI pods: the real kubectl, the API server, the agent (which
asks containerd for a streaming URL and proxies the stream there as the kubelet does) and a real containerd.

The module's API server, containerd and agent are conftest.py's fixtures, started again for this module.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import os
import pty
import select
import socket
import struct
import subprocess
import termios
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
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
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, containerd: ContainerdProcess, tmp_path: Path
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
    # With a terminal: the command's stdin is a tty, and its exit code comes back. containerd can drop a tty's
    # last output when the command exits at once after it, so the command ends only when the test has seen
    # its output and presses Enter. (The tty's size is checked through attach below: containerd 1.6 did not
    # always apply an exec's first size, docs/runtime.md.)
    command = "/bin/busybox tty; read line; exit 4"
    with _on_terminal(kubectl, "exec", "-it", "cri-exec-it", "--", "sh", "-c", command) as (tty, controller):
        _read_fd_until(controller, "/dev/pts/", explain=lambda: agent.log() + containerd.log_tail())
        os.write(controller, b"\r")
        assert tty.wait(60) == 4
    # A container the pod does not have: one line naming it.
    done = _exec(kubectl, "cri-exec-it", "-c", "nosuch", "--", "true")
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done
    assert "nosuch" in done.stderr, done.stderr
    # A command the runtime cannot start: its error reaches kubectl, and exec keeps working.
    done = _exec(kubectl, "cri-exec-it", "--", "/no/such/binary")
    assert done.returncode != 0 and "/no/such/binary" in done.stderr, done
    assert _exec(kubectl, "cri-exec-it", "--", "true").returncode == 0
    delete(kubectl, admin, "cri-exec-it")


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
        assert attach.stdout is not None
        _read_fd_until(attach.stdout.fileno(), "got hello")
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


def test_kubectl_attach_with_a_terminal_to_a_tty_container(
    agent: AgentProcess, admin: KubeClient, kubectl: Kubectl, tmp_path: Path
) -> None:
    script = "while read line; do echo got $line; /bin/busybox stty size; done"
    apply(kubectl, tmp_path, image_pod("cri-attach-tty", agent.node, script, stdin=True, tty=True))
    wait_until(lambda: running(admin, "cri-attach-tty"), 60, "cri-attach-tty Running")
    with _on_terminal(kubectl, "attach", "-it", "cri-attach-tty") as (_, controller):
        seen = ""
        for typed in (b"hello\r", b"again\r"):  # the second once attach surely runs (the first may go early)
            os.write(controller, typed)
            seen = _read_fd_until(controller, "got " + typed.decode().strip(), seen)
        # The container's tty has kubectl's size (the resize stream reached containerd).
        _read_fd_until(controller, "31 97", seen)
    delete(kubectl, admin, "cri-attach-tty")


@contextlib.contextmanager
def _on_terminal(kubectl: Kubectl, *args: str) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """kubectl on a pseudo-terminal of 31 rows and 97 columns (so -t is honoured); the process and the
    terminal's controlling side, to type into and read from. kubectl is killed at the end if still running."""
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 31, 97, 0, 0))
    argv = [str(kubectl_path()), "--kubeconfig", str(kubectl.kubeconfig), *args]
    process = subprocess.Popen(argv, stdin=terminal, stdout=terminal, stderr=terminal, start_new_session=True)
    os.close(terminal)
    try:
        yield process, controller
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)
        os.close(controller)


def _read_fd_until(
    fd: int, wanted: str, seen: str = "", timeout: float = 60, explain: Callable[[], str] = str
) -> str:
    """A descriptor's output until `wanted` shows (select: an event, not a sleep)."""
    while wanted not in seen:
        ready, _, _ = select.select([fd], [], [], timeout)
        try:
            chunk = os.read(fd, 4096).decode(errors="replace") if ready else ""
        except OSError:
            chunk = ""
        assert chunk, f"the output ended before {wanted!r}: {seen!r}\n{explain()}"
        seen += chunk
    return seen


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
