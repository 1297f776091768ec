"""kubectl against the stack `kubenode up` runs: the node, extended resources, an exclusive-CPU pod from
apply to delete, `kubenode trace` against the cgroup files, and a second `up` on the same data dir refused.
The last test stops `up` with SIGINT."""

from __future__ import annotations

import glob
import json
import os
import ssl
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from cli.up.apply import LAST_APPLIED, last_applied
from cli.up.cluster import plugin_resources
from kubenode.cpuset import parse_cpuset
from kubenode.kubeclient import NODES, PODS
from kubenode.nodeendpoints import node_daemon_endpoint
from tests.agent.support import MOUNT, wait_until
from tests.up.support import REPO, UpProcess, kubenode_env

CPUS = os.cpu_count() or 1


def pod_yaml(name: str, cpus: int) -> str:
    return textwrap.dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}}}
        spec:
          containers:
            - name: main
              image: busybox
              command: [sh, -c, 'echo "hello from CPUs $KUBENODE_CPUSET"; sleep 600']
              resources:
                limits: {{kubenode.io/cpu: {cpus}}}
        """)


def pod_cgroup(root: str, controller: str, uid: str) -> Path | None:
    found = glob.glob(str(MOUNT / controller / root.strip("/") / "**" / f"pod{uid}"), recursive=True)
    return Path(found[0]) if found else None


def test_ready_is_said_only_once_the_node_shows_every_plugin_resource(up: UpProcess) -> None:
    """The one line with "Ready" comes after the plugin's, names every resource `up` started a plugin for,
    and at the hand-over (`export KUBECONFIG=`) `kubectl describe node` shows each in capacity and
    allocatable, non-zero."""
    lines = [line.rstrip("\n") for line in up.output]
    said_ready = [index for index, line in enumerate(lines) if "Ready" in line]
    [plugin] = [
        index for index, line in enumerate(lines) if line.startswith("kubenode up: deviceplugin ready")
    ]
    [handover] = [index for index, line in enumerate(lines) if line.startswith("export KUBECONFIG=")]
    assert len(said_ready) == 1 and plugin < said_ready[0] < handover, "\n".join(lines)
    wanted = plugin_resources(up.data_dir / "plugins.yaml")
    assert wanted and all(name.startswith("kubenode.io/") for name in wanted), wanted
    # Its CPU plugin keeps any CDI spec in the data dir, never in the host's /var/run/cdi (issue 44).
    plugins = yaml.safe_load((up.data_dir / "plugins.yaml").read_text())["resources"]
    assert [r["cpu"]["cdiSpecDir"] for r in plugins if r["backend"] == "cpu"] == [str(up.data_dir / "cdi")]
    rc, out, err = up.kubectl("describe", "node")
    assert rc == 0, err
    for section in ("Capacity:", "Allocatable:"):
        block = out.split(section, 1)[1].split("\n", len(wanted) + 8)
        shown = {
            words[0].rstrip(":"): words[1] for words in (line.split() for line in block) if len(words) == 2
        }
        for name in wanted:
            assert shown.get(name, "0") != "0", f"{section} {name}: {out}"
            assert f"{name}={shown[name]}" in lines[said_ready[0]], lines[said_ready[0]]


def test_get_nodes_shows_the_node_ready(up: UpProcess) -> None:
    rc, out, err = up.kubectl("get", "nodes")
    assert rc == 0, err
    rows = [line.split() for line in out.splitlines()[1:]]
    assert len(rows) == 1 and rows[0][1] == "Ready", out


def test_describe_node_lists_the_extended_resources(up: UpProcess) -> None:
    rc, out, err = up.kubectl("describe", "node")
    assert rc == 0, err
    for section in ("Capacity:", "Allocatable:", "Allocated resources:"):
        block = out.split(section, 1)[1].split("\n\n", 1)[0] if section in out else ""
        assert "kubenode.io/cpu" in block, f"kubenode.io/cpu not under {section}:\n{out}"
        assert "kubenode.io/gpu" in block, f"kubenode.io/gpu not under {section}:\n{out}"


def test_kubectl_apply_deploy_is_accepted_document_by_document(up: UpProcess) -> None:
    """Issue 41: every document of deploy/ (the DaemonSets and their RBAC) passes the server's validation and
    admission; --dry-run=server, so nothing starts beside this stack's own node."""
    code, out, err = up.kubectl("apply", "--dry-run=server", "-f", "deploy/")
    assert code == 0, err
    for line in (
        "clusterrole.rbac.authorization.k8s.io/kubenode-scheduler created (server dry run)",
        "rolebinding.rbac.authorization.k8s.io/kubenode-scheduler-leader-election created (server dry run)",
        "daemonset.apps/kubenode-agent created (server dry run)",
    ):
        assert line in out


def test_an_exclusive_cpu_pod_from_apply_to_delete(up: UpProcess, tmp_path: Path) -> None:
    # Every CPU of the machine (2 here): no other pod may hold one, and the stack reserves none.
    manifest = tmp_path / "pinned.yaml"
    manifest.write_text(pod_yaml("all-cpus", CPUS))
    rc, out, err = up.kubectl("apply", "-f", str(manifest))
    assert rc == 0 and "pod/all-cpus created" in out, err
    pod = wait_until(
        lambda: (p := up.client.get(PODS, "all-cpus", "default"))["status"].get("phase") == "Running" and p,
        30,
        "all-cpus Running",
    )
    uid = pod["metadata"]["uid"]
    # `kubenode up` writes the annotation as kubectl does, so a later kubectl apply of its pods is unchanged.
    written = pod["metadata"]["annotations"][LAST_APPLIED]
    assert written == last_applied(yaml.safe_load(manifest.read_text()), "default")
    cgroup = pod_cgroup(up.root, "cpuset", uid)
    assert cgroup is not None, f"no cpuset cgroup for pod {uid}"
    assert len(parse_cpuset((cgroup / "cpuset.cpus").read_text())) == CPUS

    rc, out, err = up.kubectl("get", "pod", "all-cpus", "-o", "wide")
    assert rc == 0 and "Running" in out, err
    want = f"hello from CPUs {(cgroup / 'cpuset.cpus').read_text().strip()}"
    wait_until(lambda: want in up.kubectl("logs", "all-cpus")[1], 10, f"{want!r} in kubectl logs")
    # kubectl exec under `kubenode up`: the command sees the pod's exclusive CPUs; its exit code comes back.
    rc, out, err = up.kubectl("exec", "all-cpus", "--", "grep", "Cpus_allowed_list", "/proc/self/status")
    assert rc == 0 and out.split()[-1] == (cgroup / "cpuset.cpus").read_text().strip(), (out, err)
    assert up.kubectl("exec", "all-cpus", "--", "sh", "-c", "exit 3")[0] == 3

    rc, out, err = up.kubectl("delete", "-f", str(manifest), "--timeout", "30s")
    assert rc == 0, err
    wait_until(lambda: pod_cgroup(up.root, "cpuset", uid) is None, 20, "the pod cgroup to go")
    rc, out, _ = up.kubectl("get", "pods", "-o", "name")
    assert "all-cpus" not in out


TRACED = """\
apiVersion: v1
kind: Pod
metadata: {name: traced}
spec:
  containers:
    - name: main
      image: busybox
      command: [sh, -c, 'echo "serial $DEMO_GPU_SERIAL"; sleep 600']
      env: [{name: GREETING, value: hi}]
      resources:
        limits: {cpu: 250m, memory: 64Mi, kubenode.io/gpu: 1}
"""


def test_trace_shows_the_cgroup_files_as_they_are(up: UpProcess, tmp_path: Path) -> None:
    manifest = tmp_path / "traced.yaml"
    manifest.write_text(TRACED)
    assert up.kubectl("apply", "-f", str(manifest))[0] == 0
    wait_until(
        lambda: up.client.get(PODS, "traced", "default")["status"].get("phase") == "Running",
        30,
        "traced Running",
    )
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "trace", "pod", "traced", "-n", "default", "-o", "json"],
        capture_output=True, text=True, timeout=30, cwd=REPO,
        env={**kubenode_env(), "KUBECONFIG": str(up.kubeconfig)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    trace = json.loads(done.stdout)
    assert trace["problems"] == [], trace["problems"]
    assert trace["pod"]["qosClass"] == "Guaranteed"
    assert trace["scheduling"]["profile"] == "default-scheduler"
    scheduled = [e for e in trace["scheduling"]["events"] if e["reason"] == "Scheduled"]
    assert scheduled and trace["scheduling"]["node"] in scheduled[0]["message"]
    (container,) = trace["containers"]
    assert container["devices"] == {"kubenode.io/gpu": ["demo-gpu-0"]}
    assert container["pluginEnv"] == {"DEMO_GPU_SERIAL": "DEMO-0"}, "GREETING is the spec's, PATH the agent's"
    # Its own cgroup below the pod's, its device rules (a v1 allow list), the device spec's node in its /dev.
    isolation = container["isolation"]
    assert isolation["cgroup"] == f"{trace['cgroup']['path']}/{container['name']}", isolation
    assert "c 1:3 rwm" in isolation["deviceRules"] and "a *:* rwm" not in isolation["deviceRules"], isolation
    assert "demo-gpu0" in isolation["dev"] and "fuse" not in isolation["dev"], isolation
    # Every figure is what the cgroup file holds (read again here; none of these change while it runs).
    hierarchies = trace["cgroup"]["hierarchies"]
    assert {"cpu", "cpuset", "memory", "pids", "cpuacct"} <= set(hierarchies)
    for hierarchy in hierarchies.values():
        assert hierarchy["path"].endswith(trace["cgroup"]["path"])
        for name, value in hierarchy["files"].items():
            if name != "cpuacct.usage":
                assert (Path(hierarchy["path"]) / name).read_text().strip() == value, name
    files = {n: v for h in hierarchies.values() for n, v in h["files"].items()}
    assert (files["cpu.cfs_quota_us"], files["cpu.cfs_period_us"]) == ("25000", "100000")
    assert files["memory.limit_in_bytes"] == str(64 * 2**20)
    used = int((Path(hierarchies["cpuacct"]["path"]) / "cpuacct.usage").read_text())
    assert 0 < trace["cgroup"]["cpuUsageSeconds"] <= used / 1e9
    pids = {p["pid"]: p for p in trace["processes"]}
    assert container["pid"] in pids
    assert all(p["container"] == "main" for p in pids.values())
    assert isolation["cgroup"] in pids[container["pid"]]["cgroups"].values()  # the container cgroup
    assert up.kubectl("delete", "-f", str(manifest), "--timeout", "30s")[0] == 0


CRASHING = """\
apiVersion: v1
kind: Pod
metadata: {name: crashing}
spec:
  containers:
    - name: main
      image: busybox
      command: [sh, -c, 'i=0; while [ $i -lt 4 ]; do echo "tick $i"; i=$((i+1)); sleep 0.4; done; exit 3']
"""


def test_logs_follow_and_previous_after_a_crash(up: UpProcess, tmp_path: Path) -> None:
    manifest = tmp_path / "crashing.yaml"
    manifest.write_text(CRASHING)
    assert up.kubectl("apply", "-f", str(manifest))[0] == 0

    def running() -> bool:
        return bool(up.client.get(PODS, "crashing", "default")["status"].get("phase") == "Running")

    wait_until(running, 30, "crashing Running")
    # -f streams until the container exits (the kubelet ends a follow then), so kubectl returns by itself.
    rc, out, err = up.kubectl("logs", "-f", "crashing", timeout=30)
    assert rc == 0, err
    assert "tick 3" in out.splitlines(), out

    def restarted() -> bool:
        statuses = up.client.get(PODS, "crashing", "default")["status"].get("containerStatuses") or []
        return bool(statuses and statuses[0].get("restartCount", 0) >= 1)

    wait_until(restarted, 30, "a restart (after the crash-loop back-off)")
    rc, out, err = up.kubectl("logs", "--previous", "crashing")
    assert rc == 0, err
    assert out.splitlines() == ["tick 0", "tick 1", "tick 2", "tick 3"], out
    rc, out, err = up.kubectl("logs", "crashing", "--tail", "1", "--timestamps")
    assert rc == 0 and out.count("\n") <= 1, (out, err)
    assert up.kubectl("delete", "-f", str(manifest), "--timeout", "30s")[0] == 0


def test_the_agent_serves_logs_to_the_api_server_only(up: UpProcess) -> None:
    node = up.client.get(NODES, up.client.list(NODES)["items"][0]["metadata"]["name"])
    address = node_daemon_endpoint(node)
    url = f"https://{address}/containerLogs/default/nope/main"
    context = ssl.create_default_context(cafile=str(up.data_dir / "apiserver" / "pki" / "ca.crt"))
    # No client certificate (a bearer header captured from anywhere does not help): 401.
    request = urllib.request.Request(url, headers={"Authorization": "Bearer kn1.e30.AAAA"})
    try:
        urllib.request.urlopen(request, timeout=5, context=context)
    except urllib.error.HTTPError as exc:
        assert exc.code == 401, exc.code
    else:
        raise AssertionError("served without the API server's client certificate")


def test_a_second_up_on_the_same_data_dir_is_refused(up: UpProcess) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", "up", "--data-dir", str(up.data_dir), "--port", "0"],
        capture_output=True, text=True, timeout=30, env=kubenode_env(), cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "kubenode up: already running" in done.stderr and str(up.kubeconfig) in done.stderr


def test_ctrl_c_stops_everything_in_reverse_order(up: UpProcess) -> None:
    assert up.interrupt() == 0, up.log()
    stopped = [line.split()[2] for line in up.output if " stopped in " in line]
    assert stopped == [
        "controller-manager",
        "scheduler",
        "dra-driver",
        "deviceplugin",
        "agent",
        "apiserver",
    ], up.log()
    assert any(" drained in " in line for line in up.output)
    assert not list((up.data_dir / "up").glob("*.pid")), "pid files left"
