"""The DRA manager's one error, importable without grpc (syncPod catches it on every agent)."""


class ClaimPrepareError(Exception):
    """The pod's claims are not ready or a driver failed; the pod's containers must not start yet."""
