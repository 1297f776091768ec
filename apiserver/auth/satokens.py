"""Bound ServiceAccount tokens: kube's signed JWTs, their key, and the OIDC documents that publish it.

Flow: `ensure_signing_key` makes (first start) or loads `<data_dir>/pki/sa.key`, an RSA 2048 key kept
with the server's PKI (kubeadm's name); `TokenIssuer.issue` builds kube's claim set for a TokenRequest
(iss, sub, aud, exp, iat, nbf, jti and the private `kubernetes.io` claim naming the namespace, the
ServiceAccount, and the pod and node the token is bound to) and signs it RS256 with a `kid` derived as
kube does (SHA-256 of the DER PKIX public key, base64url without padding); `TokenIssuer.verify` checks
the signature, the issuer, an audience and the time window, and returns the claims (the authenticator,
saauthn.py, then checks that the bound objects still exist). `discovery_document` and `jwks` are what
kube serves at `/.well-known/openid-configuration` and `/openid/v1/jwks`.
`cryptography` does the RSA work; the JWT framing (three base64url JSON/bytes parts) is a few lines,
so no JWT library is added.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from apiserver.auth.files import write_private

# kubeadm's default --service-account-issuer; --api-audiences defaults to the issuer.
DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
KEY_FILE = "sa.key"
KUBE_CLAIM = "kubernetes.io"
SA_USER_PREFIX = "system:serviceaccount:"
# kube's clock-skew leeway when checking exp and nbf (jwt.DefaultLeeway in go-jose).
LEEWAY_SECONDS = 60


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def ensure_signing_key(data_dir: Path) -> rsa.RSAPrivateKey:
    path = data_dir / "pki" / KEY_FILE
    if path.exists():
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ValueError(f"{path}: expected an RSA private key (service-account signing key)")
        return key
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(
        path,
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )
    return key


def key_id(public_key: rsa.RSAPublicKey) -> str:
    """kube's keyIDFromPublicKey: base64url(SHA-256(DER PKIX public key)), no padding."""
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return _b64(hashlib.sha256(der).digest())


def _int_b64(value: int) -> str:
    return _b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))


@dataclass(frozen=True)
class BoundObject:
    """What a token is bound to: the pod (its uid) and its node, as the `kubernetes.io` claim names them."""

    pod_name: str
    pod_uid: str
    node_name: str = ""
    node_uid: str = ""


class InvalidToken(Exception):
    """A bearer token that is not one of ours or no longer valid; the message says why (logged, not sent)."""


class TokenIssuer:
    def __init__(self, key: rsa.RSAPrivateKey, issuer: str = DEFAULT_ISSUER) -> None:
        self._key = key
        self._public = key.public_key()
        self.issuer = issuer
        self.api_audiences: tuple[str, ...] = (issuer,)
        self.kid = key_id(self._public)

    def issue(
        self,
        namespace: str,
        account: Mapping[str, Any],
        audiences: Sequence[str],
        now: datetime,
        expiration_seconds: int,
        bound: BoundObject | None,
    ) -> tuple[str, int]:
        """The signed token and its expiry (unix seconds)."""
        issued = int(now.timestamp())
        expires = issued + expiration_seconds
        meta = account.get("metadata") or {}
        private: dict[str, Any] = {
            "namespace": namespace,
            "serviceaccount": {"name": str(meta.get("name", "")), "uid": str(meta.get("uid", ""))},
        }
        if bound is not None:
            private["pod"] = {"name": bound.pod_name, "uid": bound.pod_uid}
            if bound.node_name:
                private["node"] = {"name": bound.node_name, "uid": bound.node_uid}
        claims = {
            "aud": list(audiences),
            "exp": expires,
            "iat": issued,
            "iss": self.issuer,
            "jti": str(uuid.uuid4()),
            KUBE_CLAIM: private,
            "nbf": issued,
            "sub": f"{SA_USER_PREFIX}{namespace}:{meta.get('name', '')}",
        }
        header = {"alg": "RS256", "kid": self.kid}
        signing_input = f"{_b64(orjson.dumps(header))}.{_b64(orjson.dumps(claims))}"
        signature = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}", expires

    def looks_like_ours(self, token: str) -> bool:
        """A JWT whose issuer is ours (kube's authenticator skips other tokens without an error)."""
        parts = token.split(".")
        if len(parts) != 3:
            return False
        try:
            claims = orjson.loads(_unb64(parts[1]))
        except (ValueError, orjson.JSONDecodeError):
            return False
        return isinstance(claims, dict) and claims.get("iss") == self.issuer

    def verify(self, token: str, now: datetime) -> dict[str, Any]:
        """The claims of a token signed by our key, for one of the API audiences, within its lifetime."""
        head, body, signature = token.split(".")
        try:
            header = orjson.loads(_unb64(head))
            self._public.verify(
                _unb64(signature), f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
            claims = orjson.loads(_unb64(body))
        except InvalidSignature:
            raise InvalidToken("invalid signature") from None
        except (ValueError, orjson.JSONDecodeError):
            raise InvalidToken("malformed token") from None
        if not isinstance(header, dict) or header.get("alg") != "RS256" or not isinstance(claims, dict):
            raise InvalidToken("unsupported token header")
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences or []
        if not set(audiences) & set(self.api_audiences):
            raise InvalidToken("token audiences are not among the API audiences")
        seconds = now.timestamp()
        if not isinstance(claims.get("exp"), int) or seconds > claims["exp"] + LEEWAY_SECONDS:
            raise InvalidToken("token has expired")
        if isinstance(claims.get("nbf"), int) and seconds < claims["nbf"] - LEEWAY_SECONDS:
            raise InvalidToken("token is not valid yet")
        if not isinstance(claims.get(KUBE_CLAIM), dict):
            raise InvalidToken("token lacks the kubernetes.io claim")
        return claims

    def jwks(self) -> dict[str, Any]:
        numbers = self._public.public_numbers()
        key = {"use": "sig", "kty": "RSA", "kid": self.kid, "alg": "RS256"}
        return {"keys": [{**key, "n": _int_b64(numbers.n), "e": _int_b64(numbers.e)}]}

    def discovery_document(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "jwks_uri": f"{self.issuer}/openid/v1/jwks",
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
        }
