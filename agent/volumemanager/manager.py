"""The volume manager: every volume of a pod ready on the host before its containers start, and gone after.

The kubelet's volumemanager (WaitForAttachAndMount, the reconciler's SetUp and TearDown) for the volume
types a process pod can use. `mount_pod(pod)` is called by every syncPod, before the pod cgroup and the
processes, and makes each volume ready under `<state>/pods/<uid>/volumes/<plugin>/<name>` (the kubelet's
layout under /var/lib/kubelet), idempotently:

- emptyDir: a directory (0777); `medium: Memory` a tmpfs mounted there (in the host's mount namespace,
  so every container of the pod shares it) of `sizeLimit` bytes, or the pod's memory limit without one;
  a write beyond it fails with ENOSPC, as on the kubelet.
- hostPath: the host's path itself after its `type` check (agent/volumemanager/hostpath.py).
- configMap, secret, downwardAPI, projected (serviceAccountToken sources too, from agent/token/): the payload
  (projection.py) written by the atomic writer
  (atomicwriter.py); secret and projected volumes live on a tmpfs, as the kubelet keeps them off disk.
  Since every sync writes the payload again when it changed, an edited ConfigMap reaches a running pod
  within one resync (plus the ConfigMap cache's TTL), except through a subPath mount (see namespace.py).

A volume that cannot be set up fails the whole call with `VolumeSetupError` naming every such volume
and the reason; the pod's containers do not start. Retries back off per pod as the kubelet's operation
executor does (0.5 s doubling to 2 min 2 s), reset by a sync that mounts everything.

`unmount_pod(uid)` unmounts every mount under the pod's directory and removes it (never following a
symlink, never touching a hostPath); `cleanup_orphans(keep)` does that for every pod directory whose
UID no pod has, which is how a restarted agent (or `kubenode agent drain`) leaves nothing behind.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from pathlib import Path

from agent.container.downwardapi import HostInfo
from agent.container.volumes import MountedVolume
from agent.token.manager import TokenManager
from agent.util.configobjects import NO_OBJECTS, ConfigLookupError, ConfigObjects
from agent.volumemanager import atomicwriter, mountutil
from agent.volumemanager.hostpath import HostPathError, check_host_path
from agent.volumemanager.projection import ProjectionError, volume_payload
from kubenode.model import Pod
from kubenode.model.objects import (
    CONFIG_MAP,
    DOWNWARD_API,
    EMPTY_DIR,
    HOST_PATH,
    PROJECTED,
    SECRET,
    Volume,
)
from kubenode.model.parse import is_valid_uid

log = logging.getLogger(__name__)

PLUGIN_DIRS = {
    EMPTY_DIR: "kubernetes.io~empty-dir",
    CONFIG_MAP: "kubernetes.io~configmap",
    SECRET: "kubernetes.io~secret",
    DOWNWARD_API: "kubernetes.io~downward-api",
    PROJECTED: "kubernetes.io~projected",
}
MEMORY_BACKED_KINDS = (SECRET, PROJECTED)
BACKOFF_INITIAL_S = 0.5  # the kubelet's exponential backoff for volume operations
BACKOFF_MAX_S = 122.0


def fs_group(pod: Pod) -> int | None:
    """The pod's securityContext.fsGroup (the model keeps only what scheduling needs: read from the pod)."""
    spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
    context = spec.get("securityContext") if isinstance(spec, dict) else None
    value = context.get("fsGroup") if isinstance(context, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class VolumeSetupError(Exception):
    def __init__(self, failures: list[tuple[str, str]], retry_after: float) -> None:
        self.failures = failures
        self.retry_after = retry_after
        super().__init__("; ".join(self.messages()))

    def messages(self) -> list[str]:
        """The kubelet's FailedMount texts, one per volume."""
        return [f'MountVolume.SetUp failed for volume "{name}" : {reason}' for name, reason in self.failures]


class VolumeManager:
    def __init__(
        self,
        state_dir: Path,
        host: HostInfo,
        objects: ConfigObjects = NO_OBJECTS,
        tokens: TokenManager | None = None,
    ) -> None:
        self.pods_dir = Path(state_dir) / "pods"
        self.host = host
        self.objects = objects
        self.tokens = (
            tokens  # ServiceAccount tokens for projected volumes (None: the agent joined no cluster)
        )
        self._lock = threading.Lock()
        self._backoff: dict[str, float] = {}

    def pod_dir(self, uid: str) -> Path:
        if not is_valid_uid(uid):
            raise ValueError(f"invalid pod UID {uid[:128]!r}")
        return self.pods_dir / uid

    def volume_path(self, uid: str, volume: Volume) -> Path:
        return self.pod_dir(uid) / "volumes" / PLUGIN_DIRS[volume.kind] / volume.name

    # ----- setting up ----------------------------------------------------------------------------

    def mount_pod(self, pod: Pod) -> dict[str, MountedVolume]:
        """Every volume of the pod ready; VolumeSetupError (with the retry delay) if any is not."""
        ready: dict[str, MountedVolume] = {}
        failures: list[tuple[str, str]] = []
        for volume in pod.volumes:
            try:
                ready[volume.name] = self._set_up(pod, volume)
            except (ProjectionError, HostPathError, ConfigLookupError, atomicwriter.PayloadError) as exc:
                failures.append((volume.name, str(exc)))
            except OSError as exc:
                failures.append((volume.name, f"{exc.strerror or exc}"))
        with self._lock:
            if not failures:
                self._backoff.pop(pod.uid, None)
                return ready
            delay = self._backoff.get(pod.uid, BACKOFF_INITIAL_S / 2) * 2
            self._backoff[pod.uid] = delay = min(delay, BACKOFF_MAX_S)
        raise VolumeSetupError(failures, delay)

    def _set_up(self, pod: Pod, volume: Volume) -> MountedVolume:
        if volume.kind == HOST_PATH:
            check_host_path(volume.path, volume.host_path_type)
            return MountedVolume(volume.name, volume.path, makes_subpaths=True)
        if volume.kind not in PLUGIN_DIRS:
            raise ProjectionError(f"volume type {volume.kind!r} is not supported by kubenode (process pods)")
        path = self.volume_path(pod.uid, volume)
        if volume.kind == EMPTY_DIR:
            if volume.medium == "Memory":
                size = volume.size_limit or pod.limits.get("memory")
                self._tmpfs(path, size)
            elif volume.medium:
                raise ProjectionError(f"emptyDir medium {volume.medium!r} is not supported by kubenode")
            else:
                path.mkdir(parents=True, exist_ok=True)
            os.chmod(path, 0o777)  # the kubelet's emptyDir mode
            group = fs_group(pod)
            if group is not None:  # SetVolumeOwnership: the pod's group owns it, setgid keeps it so
                os.chown(path, -1, group)
                os.chmod(path, 0o2777)
            return MountedVolume(volume.name, str(path), makes_subpaths=True, pod_owned=True)
        payload = volume_payload(
            pod, volume, self.objects, self.host, self.tokens
        )  # before mounting: fail early
        if volume.kind in MEMORY_BACKED_KINDS:
            self._tmpfs(path, None)
        if atomicwriter.write(path, payload, fs_group(pod)):
            log.info("pod %s volume %s: wrote %d file(s)", pod.key, volume.name, len(payload))
        return MountedVolume(volume.name, str(path), read_only=True)

    def _tmpfs(self, path: Path, size: int | None) -> None:
        path.mkdir(parents=True, exist_ok=True)
        if os.path.ismount(path):
            return
        options = "mode=0777" + (f",size={size}" if size else "")
        mountutil.mount("tmpfs", str(path), "tmpfs", mountutil.MS_NOSUID | mountutil.MS_NODEV, options)

    # ----- tearing down --------------------------------------------------------------------------

    def unmount_pod(self, uid: str) -> None:
        """Unmount and remove everything the pod's volumes left on the host (hostPaths are never touched)."""
        directory = self.pod_dir(uid)
        with self._lock:
            self._backoff.pop(uid, None)
        if self.tokens is not None:
            self.tokens.drop_pod(uid)  # the kubelet's DeleteServiceAccountToken
        if not directory.exists():
            return
        mountutil.unmount_all_under(directory)
        # rmtree neither follows symlinks nor crosses into a mount (none is left): hostPaths are safe.
        shutil.rmtree(directory, ignore_errors=True)
        if directory.exists():
            log.warning("pod %s: could not remove %s", uid, directory)

    def pod_uids_on_disk(self) -> set[str]:
        try:
            return {e.name for e in os.scandir(self.pods_dir) if e.is_dir(follow_symlinks=False)}
        except FileNotFoundError:
            return set()

    def cleanup_orphans(self, orphans: set[str]) -> list[str]:
        """Remove the volumes of these pods (listed by pod_uids_on_disk, then filtered by the caller)."""
        removed = []
        for uid in sorted(orphans):
            if not is_valid_uid(uid):
                continue
            self.unmount_pod(uid)
            removed.append(uid)
        return removed
