"""Where the API server is and how to authenticate: plain kubeconfigs read here, others by official loaders.

`load_kubeconfig(path)` and `load_incluster()` fill a `kubernetes.client.Configuration`
with `kubernetes.config` (so every kubeconfig form the official client understands works:
token, tokenFile, client certificates, CA files or inline data, exec plugins, the
service-account token that is re-read as it rotates) and wrap it in a `ClientConfig`
that the raw transport reads: the server URL, TLS material as file paths, and the
Authorization header, asked for on each request so refresh hooks keep working. A kubeconfig of the
plain forms (token or client certificate, CA file or data: what the daemons are given) is read by
`kubeconfig.read_plain` without importing the official client, which costs a process ~30 MiB; any
other form goes to the official loader as before.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubenode.kubeclient.errors import KubeConfigError
from kubenode.kubeclient.kubeconfig import read_plain

IN_CLUSTER_HOST_ENV = "KUBERNETES_SERVICE_HOST"
AUTH_CACHE_S = 1.0


@dataclass
class ClientConfig:
    host: str  # https://10.0.0.1:6443 or http://127.0.0.1:8080, no trailing slash
    verify_ssl: bool = True
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    tls_server_name: str | None = None
    # The official client's Configuration; kept for its auth hooks (token refresh, exec plugins).
    official: Any = None
    # The Authorization header of a plain kubeconfig (a token, a username/password), read without it.
    static_authorization: str | None = None
    _auth_cache: tuple[float, str | None] | None = field(default=None, init=False, repr=False, compare=False)

    def authorization(self) -> str | None:
        """The Authorization header value right now ("Bearer <token>", "Basic ..."), or None.

        Asked again at most once a second: the official loader's refresh hook re-applies the
        whole config on every call (re-reading the proxy environment), about 1.5 ms, which at
        hundreds of requests a second was the client's largest cost. A refreshed token is
        therefore used at most 1 s late; tokens are refreshed well before they expire."""
        now = time.monotonic()
        cached = self._auth_cache
        if cached is not None and now - cached[0] < AUTH_CACHE_S:
            return cached[1]
        header = self._authorization()
        self._auth_cache = (now, header)
        return header

    def _authorization(self) -> str | None:
        cfg = self.official
        if cfg is None:
            return self.static_authorization
        token = cfg.get_api_key_with_prefix("BearerToken", alias="authorization")
        if token:
            return str(token) if " " in str(token) else f"Bearer {token}"
        if cfg.username or cfg.password:
            return str(cfg.get_basic_auth_token())
        return None


def _from_official(cfg: Any) -> ClientConfig:
    ca = cfg.ssl_ca_cert
    if ca is None and getattr(cfg, "ca_cert_data", None):
        # Inline CA data the loader did not write to a file: write it once, privately.
        import tempfile

        data = cfg.ca_cert_data
        with tempfile.NamedTemporaryFile("wb", suffix=".crt", prefix="kubenode-ca-", delete=False) as f:
            f.write(data.encode() if isinstance(data, str) else data)
            ca = f.name
    return ClientConfig(
        host=str(cfg.host).rstrip("/"),
        verify_ssl=bool(cfg.verify_ssl),
        ca_file=ca,
        cert_file=cfg.cert_file,
        key_file=cfg.key_file,
        tls_server_name=getattr(cfg, "tls_server_name", None),
        official=cfg,
    )


def load_kubeconfig(path: Path | str, context: str | None = None) -> ClientConfig:
    """The kubeconfig file's current (or named) context; KubeConfigError names the file and the problem."""
    plain = read_plain(path, context)
    if plain is not None:
        authorization = plain.pop("authorization")
        return ClientConfig(**plain, static_authorization=authorization)
    from kubernetes import client, config

    cfg = client.Configuration()
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(path), context=context, client_configuration=cfg, persist_config=False
        )
    except Exception as exc:  # the loader raises YAML, config, OS, key and type errors alike
        detail = " ".join(str(exc).split())
        raise KubeConfigError(f"{path}: cannot load kubeconfig: {detail}") from None
    return _from_official(cfg)


def load_incluster() -> ClientConfig:
    """The pod's service account (token re-read as it rotates) and the cluster CA."""
    from kubernetes import client, config

    cfg = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    except (config.ConfigException, OSError) as exc:
        raise KubeConfigError(f"in-cluster config: {exc}") from None
    return _from_official(cfg)


def in_cluster() -> bool:
    return bool(os.environ.get(IN_CLUSTER_HOST_ENV))


def load(path: Path | str | None) -> ClientConfig:
    """A kubeconfig file if given, else the in-cluster service account."""
    if path:
        return load_kubeconfig(path)
    if not in_cluster():
        raise KubeConfigError(
            f"no kubeconfig given and not running in a cluster ({IN_CLUSTER_HOST_ENV} is not set)"
        )
    return load_incluster()
