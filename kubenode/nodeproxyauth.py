"""How the API server proves itself to an agent's daemon endpoint (`/containerLogs`), with no TokenReview.

The kubelet trusts kube-apiserver by its client certificate (--kubelet-client-certificate, checked against
--client-ca-file) and then asks the API server (SubjectAccessReview) whether that identity may read logs.
The agent's endpoint is plain HTTP, so instead of a TLS client certificate the API server signs each
proxied request with its CA's private key, and the agent verifies the signature with the CA certificate it
already trusts (its kubeconfig's certificate-authority). Only a holder of the CA key, the API server, can
mint a token, so no secret is shared and no review call is made.

    token  = "kn1." + b64url(payload) + "." + b64url(ECDSA-SHA256 signature over DOMAIN + payload)
    payload = {"node": <node name>, "path": <request path, no query>, "exp": <unix seconds>}

A token is good for one node, one path and TOKEN_TTL_S seconds. The signed bytes begin with DOMAIN, so a
token signature can never pass for a certificate signature (DER, which begins with 0x30) or vice versa.
Limits: over plain HTTP a token seen on the wire could be replayed for the same path until it expires.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

PREFIX = "kn1"
DOMAIN = b"kubenode node proxy v1\n"
TOKEN_TTL_S = 60


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Signer:
    """The API server's side: mints tokens with the CA's EC private key (PEM)."""

    def __init__(self, ca_key_pem: bytes, clock: Callable[[], float] = time.time) -> None:
        key = serialization.load_pem_private_key(ca_key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("the CA key must be an EC private key")
        self._key = key
        self._clock = clock

    def token(self, node: str, path: str) -> str:
        payload = json.dumps(
            {"node": node, "path": path, "exp": int(self._clock()) + TOKEN_TTL_S}, separators=(",", ":")
        ).encode()
        signature = self._key.sign(DOMAIN + payload, ec.ECDSA(hashes.SHA256()))
        return f"{PREFIX}.{_b64(payload)}.{_b64(signature)}"


class Verifier:
    """The agent's side: checks a token against the CA certificate (PEM) from its kubeconfig."""

    def __init__(self, ca_cert_pem: bytes, node: str, clock: Callable[[], float] = time.time) -> None:
        key = x509.load_pem_x509_certificate(ca_cert_pem).public_key()
        if not isinstance(key, ec.EllipticCurvePublicKey):
            raise ValueError("the CA certificate must hold an EC public key")
        self._key = key
        self._node = node
        self._clock = clock

    def problem(self, authorization: str | None, path: str) -> str | None:
        """None if `Authorization: Bearer <token>` admits this request for `path`, else why not."""
        if not authorization or not authorization.startswith("Bearer "):
            return "no bearer token"
        parts = authorization.removeprefix("Bearer ").strip().split(".")
        if len(parts) != 3 or parts[0] != PREFIX:
            return "not a kubenode node-proxy token"
        try:
            payload = _unb64(parts[1])
            self._key.verify(_unb64(parts[2]), DOMAIN + payload, ec.ECDSA(hashes.SHA256()))
            claims = json.loads(payload)
        except (ValueError, InvalidSignature):
            return "bad token signature"
        if claims.get("node") != self._node:
            return f"token is for node {claims.get('node')!r}"
        if claims.get("path") != path:
            return "token is for another path"
        if not isinstance(claims.get("exp"), int) or claims["exp"] < self._clock():
            return "token expired"
        return None


ADDRESS_PREFERENCE = ("InternalIP", "ExternalIP", "Hostname")


def node_daemon_endpoint(node: Mapping[str, Any]) -> str | None:
    """host:port of a Node's daemon endpoint (status.addresses by kube's preference, and
    daemonEndpoints.kubeletEndpoint.Port), or None while the node has not reported one."""
    status = node.get("status") or {}
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    host = next((addresses[t] for t in ADDRESS_PREFERENCE if addresses.get(t)), None)
    return f"{host}:{port}" if host and port else None
