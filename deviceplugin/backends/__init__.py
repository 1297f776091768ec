"""Device backends (cpu, gpu, static) and the factory that builds one from a resource's config."""

from __future__ import annotations

from deviceplugin.backend import Backend
from deviceplugin.config import ResourceConfig


def make_backend(resource: ResourceConfig, kubelet_dir: str) -> Backend:
    """Build the resource's backend, wrapped for sharing (time-slicing or MPS) when replicas > 1."""
    backend: Backend
    if resource.backend == "cpu":
        from deviceplugin.backends.cpu import CpuBackend

        backend = CpuBackend(resource.cpu, resource.name)
    elif resource.backend == "gpu":
        from deviceplugin.backends.gpu import GpuBackend

        backend = GpuBackend(resource.name, resource.gpu)
    else:
        from deviceplugin.backends.static import StaticBackend

        backend = StaticBackend(resource.static, kubelet_dir)
    if resource.replicas > 1:
        from deviceplugin.replicas import ReplicatedBackend

        mps = resource.backend == "gpu" and resource.gpu.sharing == "mps"
        backend = ReplicatedBackend(backend, resource.replicas, one_per_request=mps)
    return backend
