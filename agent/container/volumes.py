"""A pod's volume as the runtimes mount it into a container, ready on the host (agent/volumemanager)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MountedVolume:
    name: str
    path: str  # on the host
    # configMap, secret, downwardAPI and projected volumes are read-only in every container, as in kube.
    read_only: bool = False
    # emptyDir and hostPath: a subPath that does not exist is made (a directory), as the kubelet does.
    makes_subpaths: bool = False
    # emptyDir: the pod's own directory in the state dir, so a mount point under its mountPath may be made
    # in it (a hostPath is the host's: a mount point below it is made in a shadow instead).
    pod_owned: bool = False
