"""MPS sharing: one control daemon per shared GPU, with limits set to one replica's share.

Flow: `GpuBackend.start` (sharing mps) calls `MpsDaemon.start` for each GPU; it makes
`<mps_root>/<uuid>/{pipe,log,shm}`, starts `nvidia-cuda-mps-control -d` with
`CUDA_VISIBLE_DEVICES=<uuid>` and the pipe and log directories, in a private mount namespace
whose /dev/shm is the GPU's shm directory (as NVIDIA runs it in its own container), then sends
`set_default_device_pinned_mem_limit 0 <MiB>M` (device 0: the daemon sees only its GPU) and
`set_default_active_thread_percentage <100/replicas>` on the control pipe. `allocation` gives a
pod `CUDA_MPS_PIPE_DIRECTORY` and the pipe and shm mounts (of one GPU: a container holds one MPS
replica, deviceplugin.replicas refuses more, as NVIDIA's plugin does); the MPS server the daemon starts for
the pod's clients enforces the limits inside CUDA, so a pod asking for more than its share fails
its own allocation. `stop` sends `quit`.
"""

from __future__ import annotations

import logging
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from deviceplugin.config import MountSpec

log = logging.getLogger(__name__)

PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"
LOG_ENV = "CUDA_MPS_LOG_DIRECTORY"
CONTROL_TIMEOUT_S = 10
# The daemon's /dev/shm is its GPU's directory: clients (pods) get the same directory as theirs.
_PRIVATE_SHM = 'mount --make-rprivate / && mount --bind "$0" /dev/shm && exec "$@"'


class MpsError(RuntimeError):
    """An MPS daemon could not be started or configured; one line naming the GPU and the step."""


@dataclass(frozen=True)
class MpsLimits:
    pinned_memory_mib: int
    active_thread_percentage: int


def limits_for(memory_mib: int, replicas: int) -> MpsLimits:
    """One replica's share, as NVIDIA's plugin sets it: an equal part of memory and of the SMs."""
    return MpsLimits(memory_mib // replicas, 100 // replicas)


class MpsDaemon:
    def __init__(self, root: str, uuid: str, control: str, limits: MpsLimits) -> None:
        self.uuid = uuid
        self.control = control
        self.limits = limits
        self.dir = Path(root) / uuid
        self.pipe_dir, self.log_dir, self.shm_dir = self.dir / "pipe", self.dir / "log", self.dir / "shm"
        self.running = False

    def _env(self) -> dict[str, str]:
        return os.environ | {
            "CUDA_VISIBLE_DEVICES": self.uuid,
            PIPE_ENV: str(self.pipe_dir),
            LOG_ENV: str(self.log_dir),
        }

    def _run(self, argv: list[str], stdin: str, step: str) -> None:
        try:
            done = subprocess.run(
                argv, input=stdin, env=self._env(), capture_output=True, text=True, timeout=CONTROL_TIMEOUT_S
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise MpsError(f"MPS for GPU {self.uuid}: {step}: {exc}") from None
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip().replace("\n", "; ")
            raise MpsError(f"MPS for GPU {self.uuid}: {step}: exit {done.returncode}: {why}")

    def start(self) -> None:
        for directory in (self.pipe_dir, self.log_dir, self.shm_dir):
            directory.mkdir(parents=True, exist_ok=True)
        daemon = ["unshare", "--mount", "sh", "-c", _PRIVATE_SHM, str(self.shm_dir), self.control, "-d"]
        self._run(daemon, "", "starting the control daemon")
        self.running = True
        commands = (
            f"set_default_device_pinned_mem_limit 0 {self.limits.pinned_memory_mib}M\n"
            f"set_default_active_thread_percentage {self.limits.active_thread_percentage}\n"
        )
        self._run([self.control], commands, "setting the default limits")
        log.info(
            "MPS for GPU %s: %d MiB pinned memory, %d%% threads per client",
            self.uuid,
            self.limits.pinned_memory_mib,
            self.limits.active_thread_percentage,
        )

    def stop(self) -> None:
        if not self.running:
            return
        self.running = False
        try:
            self._run([self.control], "quit\n", "quitting")
        except MpsError as exc:  # stopping the plugin goes on; the next start replaces the daemon
            log.warning("%s", exc)

    def allocation(self) -> tuple[dict[str, str], list[MountSpec]]:
        """What a pod sharing this GPU needs: the pipe directory, and the shm the daemon uses."""
        mounts = [
            MountSpec(str(self.pipe_dir), str(self.pipe_dir)),
            MountSpec(str(self.shm_dir), "/dev/shm"),
        ]
        return {PIPE_ENV: str(self.pipe_dir)}, mounts
