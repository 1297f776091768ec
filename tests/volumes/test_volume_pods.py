"""Pods with volumes on a real agent: real mounts, real processes, each container in its own mount namespace.

ConfigMaps and Secrets come from an in-memory store (tests/volumes/support.py); tests/agent_cluster runs
the same through the real API server and kubectl.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.manifests import write_manifest
from tests.agent.support import Harness, wait_until
from tests.volumes.support import FakeObjects, mounts_below


def _uid(harness: Harness, name: str) -> str:
    pod = wait_until(lambda: harness.pod(name), 10, f"pod {name}")
    return str(pod["metadata"]["uid"])


def _log(harness: Harness, name: str) -> str:
    pod = harness.pod(name) or {}
    paths = [c.get("logPath", "") for c in pod.get("status", {}).get("containerStatuses", [])]
    for path in paths:
        if path and os.path.exists(path):
            return Path(path).read_text()
    logs = harness.config.state_dir / "logs"
    found = sorted(logs.glob(f"default_{name}_*/main/*.log")) if logs.exists() else []
    return found[-1].read_text() if found else ""


def _container(harness: Harness, name: str) -> dict[str, Any]:
    pod = harness.pod(name) or {}
    statuses = pod.get("status", {}).get("containerStatuses", [])
    return dict(statuses[0]) if statuses else {}


SCRIPT = """
echo "FROM_CM=$FROM_CM FROM_SECRET=$FROM_SECRET CM_greeting=$CM_greeting MAYBE=${{MAYBE-unset}}"
echo "cfg=$(cat {base}/cfg/greeting) pw=$(cat {base}/sec/pw) mode=$(stat -L -c %a {base}/sec/pw)"
echo "sub=$(cat {base}/one.conf)"
cat /etc/{tag}/labels; echo
touch {base}/cfg/x 2>/dev/null || echo cfg-read-only
touch {base}/scratch/x && echo scratch-writable
echo from-pod > {base}/host/written
echo "cwd=$(pwd)"
echo ready
while true; do
  cat {base}/cfg/greeting > {base}/scratch/seen.tmp && mv {base}/scratch/seen.tmp {base}/scratch/seen
  cat {base}/one.conf > {base}/scratch/sub.tmp && mv {base}/scratch/sub.tmp {base}/scratch/sub
  sleep 0.1
done
"""


def _volumes_pod(tag: str, base: str, host_dir: Path) -> str:
    script = SCRIPT.format(base=base, tag=tag)
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: vols, labels: {{app: demo}}}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    command: [sh, -c, {json.dumps(script)}]
    workingDir: {base}/scratch
    env:
    - {{name: FROM_CM, valueFrom: {{configMapKeyRef: {{name: app, key: greeting}}}}}}
    - {{name: FROM_SECRET, valueFrom: {{secretKeyRef: {{name: creds, key: password}}}}}}
    - {{name: MAYBE, valueFrom: {{configMapKeyRef: {{name: absent, key: x, optional: true}}}}}}
    envFrom:
    - {{prefix: CM_, configMapRef: {{name: app}}}}
    volumeMounts:
    - {{name: cfg, mountPath: {base}/cfg}}
    - {{name: sec, mountPath: {base}/sec}}
    - {{name: scratch, mountPath: {base}/scratch}}
    - {{name: info, mountPath: /etc/{tag}}}
    - {{name: cfg, mountPath: {base}/one.conf, subPath: app.conf}}
    - {{name: host, mountPath: {base}/host}}
  volumes:
  - {{name: cfg, configMap: {{name: app}}}}
  - {{name: sec, secret: {{secretName: creds, defaultMode: 0400, items: [{{key: password, path: pw}}]}}}}
  - {{name: scratch, emptyDir: {{}}}}
  - {{name: info, downwardAPI: {{items: [{{path: labels, fieldRef: {{fieldPath: metadata.labels}}}}]}}}}
  - {{name: host, hostPath: {{path: {host_dir}, type: DirectoryOrCreate}}}}
"""


def test_a_pod_reads_its_configmap_secret_env_and_sees_updates(
    make_harness: Callable[..., Harness], manifests: Path, tmp_path: Path, objects: FakeObjects
) -> None:
    tag = f"kn-vol-{uuid.uuid4().hex[:8]}"
    base = f"/{tag}"  # missing on the host: made inside the container's namespace only
    host_dir = tmp_path / "hostdir"
    objects.configmap("app", {"greeting": "hello", "app.conf": "v1"})
    objects.secret("creds", {"password": "s3cret"})
    harness = make_harness(objects=objects, resync_interval=0.5).start()
    write_manifest(manifests, "vols.yaml", _volumes_pod(tag, base, host_dir))
    uid = _uid(harness, "vols")
    log = wait_until(
        lambda: "ready" in _log(harness, "vols") and _log(harness, "vols"), 20, "the pod's output"
    )
    assert "FROM_CM=hello FROM_SECRET=s3cret CM_greeting=hello MAYBE=unset" in log
    assert "cfg=hello pw=s3cret mode=400" in log
    assert "sub=v1" in log
    assert 'app="demo"' in log
    assert "cfg-read-only" in log and "scratch-writable" in log
    assert f"cwd={base}/scratch" in log
    assert (host_dir / "written").read_text() == "from-pod\n"
    # The host's view is unchanged: the mountPaths exist only in the container's namespace.
    assert not os.path.lexists(base) and not os.path.lexists(f"/etc/{tag}")
    pod_dir = harness.config.state_dir / "pods" / uid
    scratch = pod_dir / "volumes/kubernetes.io~empty-dir/scratch"
    assert os.readlink(pod_dir / "volumes/kubernetes.io~configmap/cfg/..data").startswith("..")
    assert os.path.ismount(pod_dir / "volumes/kubernetes.io~secret/sec")  # secrets stay off the disk

    # An edited ConfigMap reaches the running pod (a subPath mount keeps the file it was given).
    wait_until(lambda: (scratch / "seen").exists(), 10, "the pod's first copy")
    objects.configmap("app", {"greeting": "bye", "app.conf": "v2"})
    wait_until(lambda: (scratch / "seen").read_text() == "bye", 15, "the update inside the pod")
    assert (scratch / "sub").read_text() == "v1"

    (manifests / "vols.yaml").unlink()
    wait_until(lambda: not pod_dir.exists(), 20, "the pod's volumes removed")
    assert not mounts_below(str(harness.config.state_dir))
    assert host_dir.is_dir()  # a hostPath is never removed


def test_a_memory_empty_dir_over_its_size_limit_fails_the_write(
    make_harness: Callable[..., Harness], manifests: Path
) -> None:
    harness = make_harness().start()
    write_manifest(
        manifests,
        "mem.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: mem}
        spec:
          restartPolicy: Never
          containers:
          - name: main
            command: [sh, -c, "dd if=/dev/zero of=/cache/big bs=1024 count=2048 2>&1; echo rc=$?; exit 3"]
            volumeMounts: [{name: cache, mountPath: /cache}]
          volumes:
          - {name: cache, emptyDir: {medium: Memory, sizeLimit: 1Mi}}
        """,
    )
    harness.wait_phase("mem", "Failed", timeout=20)
    log = _log(harness, "mem")
    assert "No space left on device" in log and "rc=1" in log
    assert not os.path.lexists("/cache/big")


def test_a_missing_configmap_holds_the_pod_with_failed_mount_until_it_exists(
    make_harness: Callable[..., Harness], manifests: Path, objects: FakeObjects
) -> None:
    harness = make_harness(objects=objects)
    events: list[tuple[str, str, str]] = []
    harness.agent.pod_event = lambda pod, kind, reason, message: events.append((kind, reason, message))
    harness.start()
    write_manifest(
        manifests,
        "late.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: late}
        spec:
          containers:
          - name: main
            command: [sh, -c, "cat /config/k; sleep 600"]
            volumeMounts: [{name: config, mountPath: /config}]
          volumes:
          - {name: config, configMap: {name: later}}
        """,
    )
    wait_until(lambda: events, 10, "a FailedMount event")
    assert events[0] == (
        "Warning",
        "FailedMount",
        'MountVolume.SetUp failed for volume "config" : configmap "later" not found',
    )
    assert not harness.agent.runtime.running_pids(_uid(harness, "late"))
    objects.configmap("later", {"k": "now"})
    harness.wait_phase("late", "Running", timeout=20)
    wait_until(lambda: "now" in _log(harness, "late"), 10, "the file read")


def test_a_missing_key_is_create_container_config_error(
    make_harness: Callable[..., Harness], manifests: Path, objects: FakeObjects
) -> None:
    objects.configmap("app", {"other": "x"})
    harness = make_harness(objects=objects).start()
    write_manifest(
        manifests,
        "env.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: env}
        spec:
          containers:
          - name: main
            command: [sleep, "600"]
            env:
            - {name: WANTED, valueFrom: {configMapKeyRef: {name: app, key: missing}}}
        """,
    )

    def waiting() -> dict[str, Any] | None:
        state = _container(harness, "env").get("state", {})
        return (
            state.get("waiting")
            if state.get("waiting", {}).get("reason") == "CreateContainerConfigError"
            else None
        )

    reason = wait_until(waiting, 10, "CreateContainerConfigError")
    assert reason["message"] == "couldn't find key missing in ConfigMap default/app"


def test_a_host_path_of_the_wrong_type_and_a_mount_on_a_file_are_refused(
    make_harness: Callable[..., Harness], manifests: Path, tmp_path: Path
) -> None:
    harness = make_harness()
    events: list[str] = []
    harness.agent.pod_event = lambda pod, kind, reason, message: events.append(message)
    harness.start()
    write_manifest(
        manifests,
        "typed.yaml",
        f"""
        apiVersion: v1
        kind: Pod
        metadata: {{name: typed}}
        spec:
          containers:
          - name: main
            command: [sleep, "600"]
            volumeMounts: [{{name: h, mountPath: /h}}]
          volumes:
          - {{name: h, hostPath: {{path: {tmp_path}, type: File}}}}
        """,
    )
    wait_until(lambda: events, 10, "a FailedMount event")
    assert (
        events[0]
        == f'MountVolume.SetUp failed for volume "h" : hostPath type check failed: {tmp_path} is not a file'
    )
    write_manifest(
        manifests,
        "onfile.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: onfile}
        spec:
          restartPolicy: Never
          containers:
          - name: main
            command: [sleep, "600"]
            volumeMounts: [{name: d, mountPath: /etc/hostname}]
          volumes:
          - {name: d, emptyDir: {}}
        """,
    )
    harness.wait_phase("onfile", "Failed", timeout=20)
    terminated = _container(harness, "onfile")["state"]["terminated"]
    assert terminated["reason"] == "StartError"
    assert "mountPath /etc/hostname is a file but the volume source is a directory" in terminated["message"]


def test_volumes_nobody_owns_are_unmounted_and_removed_at_start(
    make_harness: Callable[..., Harness], tmp_path: Path
) -> None:
    from agent.volumemanager import mountutil

    state = tmp_path / "state"
    orphan = state / "pods" / "0123-orphan" / "volumes" / "kubernetes.io~empty-dir" / "mem"
    orphan.mkdir(parents=True)
    mountutil.mount("tmpfs", str(orphan), "tmpfs", 0, "size=64k")
    harness = make_harness(state_dir=state).start()
    wait_until(lambda: not (state / "pods" / "0123-orphan").exists(), 10, "the orphan's volumes removed")
    assert not mounts_below(str(state))
    assert harness.agent.volumes.pod_uids_on_disk() == set()


def test_a_deleted_pods_tmpfs_leaves_the_other_pods_namespaces_too(
    make_harness: Callable[..., Harness], manifests: Path
) -> None:
    """A container's namespace is a private copy of the host's mounts, so it holds the other pods' volume
    mounts of that moment; removing a deleted pod's directory detaches them there as well."""
    harness = make_harness().start()
    pod = """
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}}}
        spec:
          terminationGracePeriodSeconds: 1
          containers:
          - name: main
            command: [sleep, "600"]
            volumeMounts: [{{name: mem, mountPath: /kn-mem-test}}]
          volumes:
          - {{name: mem, emptyDir: {{medium: Memory}}}}
        """
    write_manifest(manifests, "first.yaml", pod.format(name="first"))
    first = _uid(harness, "first")
    harness.wait_phase("first", "Running", timeout=20)
    write_manifest(manifests, "second.yaml", pod.format(name="second"))
    second_pid = harness.main_pid("second")
    assert first in Path(f"/proc/{second_pid}/mountinfo").read_text()
    (manifests / "first.yaml").unlink()
    wait_until(
        lambda: not (harness.config.state_dir / "pods" / first).exists(), 20, "the first pod's volumes"
    )
    assert first not in Path(f"/proc/{second_pid}/mountinfo").read_text()


def test_nested_mount_points_go_into_the_pods_volume_or_a_shadow_never_the_host(
    make_harness: Callable[..., Harness], manifests: Path, tmp_path: Path, objects: FakeObjects
) -> None:
    """A mountPath below an emptyDir's is made in the emptyDir (the pod's own directory); below a hostPath's
    it is made in a shadow of the hostPath's directory, so the host's directory gets nothing."""
    objects.configmap("app", {"k": "v"})
    host_dir = tmp_path / "shared"
    host_dir.mkdir()
    (host_dir / "existing").write_text("kept")
    base = f"/kn-nest-{uuid.uuid4().hex[:8]}"
    harness = make_harness(objects=objects).start()
    script = f"cat {base}/cfg/k {base}/host/inner/k {base}/host/existing; echo; echo done; sleep 600"
    write_manifest(
        manifests,
        "nest.yaml",
        f"""
        apiVersion: v1
        kind: Pod
        metadata: {{name: nest}}
        spec:
          terminationGracePeriodSeconds: 1
          containers:
          - name: main
            command: [sh, -c, {json.dumps(script)}]
            volumeMounts:
            - {{name: scratch, mountPath: {base}}}
            - {{name: cfg, mountPath: {base}/cfg}}
            - {{name: host, mountPath: {base}/host}}
            - {{name: cfg, mountPath: {base}/host/inner}}
          volumes:
          - {{name: scratch, emptyDir: {{}}}}
          - {{name: cfg, configMap: {{name: app}}}}
          - {{name: host, hostPath: {{path: {host_dir}, type: Directory}}}}
        """,
    )
    uid = _uid(harness, "nest")
    # Looked at while the pod runs: a finished pod's volumes are torn down.
    wait_until(lambda: "done" in _log(harness, "nest"), 20, "the pod's output")
    assert "vvkept" in _log(harness, "nest")
    assert sorted(os.listdir(host_dir)) == ["existing"]
    scratch = harness.config.state_dir / "pods" / uid / "volumes/kubernetes.io~empty-dir/scratch"
    assert sorted(os.listdir(scratch)) == ["cfg", "host"]  # the mount points, in the pod's own volume
    assert not os.path.lexists(base)


def test_a_restarted_agent_adopts_a_running_pods_volumes(
    make_harness: Callable[..., Harness], manifests: Path, tmp_path: Path, objects: FakeObjects
) -> None:
    """The agent stops with its pod running (as after a SIGKILL: nothing is torn down); the next one adopts
    the process and its volumes as they are: the same tmpfs, once, with what the pod wrote in it."""
    objects.configmap("app", {"k": "v"})
    state = tmp_path / "state"
    first = make_harness(state, objects=objects).start()
    write_manifest(
        manifests,
        "kept.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: kept}
        spec:
          terminationGracePeriodSeconds: 1
          containers:
          - name: main
            command: [sh, -c, "echo written > /kn-kept/mem/file; sleep 600"]
            volumeMounts:
            - {name: mem, mountPath: /kn-kept/mem}
            - {name: cfg, mountPath: /kn-kept/cfg}
          volumes:
          - {name: mem, emptyDir: {medium: Memory, sizeLimit: 1Mi}}
          - {name: cfg, configMap: {name: app}}
        """,
    )
    uid = _uid(first, "kept")
    pid = first.main_pid("kept")
    mem = state / "pods" / uid / "volumes/kubernetes.io~empty-dir/mem"
    wait_until(lambda: (mem / "file").exists(), 10, "the pod's write")
    first.agent.stop(terminate_pods=False)
    first.started = False

    second = make_harness(state, objects=objects, resync_interval=0.3).start()
    assert second.main_pid("kept") == pid
    # A sync of the adopted pod sets its volumes up again (seen by an edit reaching its ConfigMap volume).
    objects.configmap("app", {"k": "v2"})
    cfg = state / "pods" / uid / "volumes/kubernetes.io~configmap/cfg/k"
    wait_until(lambda: cfg.read_text() == "v2", 15, "a sync of the adopted pod")
    assert second.main_pid("kept") == pid
    assert (mem / "file").read_text() == "written\n"
    assert mounts_below(str(state)).count(str(mem)) == 1
    (manifests / "kept.yaml").unlink()
    wait_until(lambda: not (state / "pods" / uid).exists(), 20, "the pod's volumes removed")
    assert not mounts_below(str(state))
