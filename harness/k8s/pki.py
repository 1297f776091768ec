"""A throwaway PKI for the real control plane, made with `cryptography`: one CA, the API server's serving
certificate (127.0.0.1 and localhost), client certificates (CN = user, O = groups) and kubeconfigs that name
them by path. Test harness only: keys are EC P-256 (fast to make), except the ServiceAccount signing key,
which kube-apiserver wants as RSA.

    ca = CertificateAuthority.create(dir)                       # dir/ca.crt, dir/ca.key
    crt, key = ca.issue(dir, "admin", ["system:masters"])       # a client certificate
    crt, key = ca.issue(dir, "apiserver", server_hosts=["127.0.0.1", "localhost"])   # serving
    write_kubeconfig(path, server, ca.cert_path, crt, key)
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DAYS = 30


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass
class CertificateAuthority:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    cert_path: Path
    key_path: Path

    @classmethod
    def create(cls, directory: Path, name: str = "kubenode-interop-ca") -> CertificateAuthority:
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now() - dt.timedelta(minutes=5))
            .not_valid_after(_now() + dt.timedelta(days=DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        cert_path, key_path = directory / "ca.crt", directory / "ca.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_private(key_path, _key_pem(key))
        return cls(cert, key, cert_path, key_path)

    def issue(
        self,
        directory: Path,
        common_name: str,
        groups: Sequence[str] = (),
        *,
        server_hosts: Sequence[str] = (),
        client: bool = True,
        file_stem: str | None = None,
    ) -> tuple[Path, Path]:
        """A certificate and key under `directory` (`<stem>.crt`, `<stem>.key`; the stem defaults to the CN
        with ':' made '-'). With `server_hosts` it is a serving certificate for them (and a client one too
        unless `client=False`)."""
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, group) for group in groups]
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        usages = []
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        if server_hosts:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_now() - dt.timedelta(minutes=5))
            .not_valid_after(_now() + dt.timedelta(days=DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, True, False, False, False, False, False, False, False), critical=True
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        if server_hosts:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([_san(h) for h in server_hosts]), critical=False
            )
        cert = builder.sign(self.key, hashes.SHA256())
        stem = file_stem or common_name.replace(":", "-")
        cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_private(key_path, _key_pem(key))
        return cert_path, key_path


def write_rsa_key(private_path: Path, public_path: Path, bits: int = 2048) -> None:
    """The ServiceAccount signing key (kube-apiserver's --service-account-signing-key-file) and its public
    half (--service-account-key-file)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    _write_private(private_path, _key_pem(key))
    public_path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def write_kubeconfig(
    path: Path, server: str, ca_cert: Path, client_cert: Path, client_key: Path, *, user: str = "user"
) -> Path:
    """A kubeconfig naming the files by absolute path (kubelet, kubectl, client-go, the Python client and
    kubenode's own reader all take those)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "interop", "cluster": {"server": server, "certificate-authority": str(ca_cert)}}
        ],
        "users": [
            {"name": user, "user": {"client-certificate": str(client_cert), "client-key": str(client_key)}}
        ],
        "contexts": [{"name": "interop", "context": {"cluster": "interop", "user": user}}],
        "current-context": "interop",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_private(path, yaml.safe_dump(config).encode())
    return path
