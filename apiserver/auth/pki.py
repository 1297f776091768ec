"""The API server's CA and serving certificate, made with `cryptography` on first start, kept in the data dir.

Layout (as kubeadm names them): `<data_dir>/pki/ca.crt`, `ca.key`, `apiserver.crt`, `apiserver.key`. The CA
lives 10 years, the serving certificate 1 year; the serving certificate is re-issued from the same CA when it
expires within 30 days or lacks one of the requested hosts, so existing kubeconfigs (which pin the CA)
keep working.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from apiserver.auth.files import write_private

CA_DAYS = 3650
SERVING_DAYS = 365
RENEW_BEFORE = dt.timedelta(days=30)


@dataclass(frozen=True)
class ServingCert:
    ca_path: Path
    cert_path: Path
    key_path: Path

    @property
    def ca_pem(self) -> bytes:
        return self.ca_path.read_bytes()


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _ensure_ca(pki: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_crt, ca_key = pki / "ca.crt", pki / "ca.key"
    if ca_crt.exists() and ca_key.exists():
        key = serialization.load_pem_private_key(ca_key.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{ca_key}: expected an EC private key")
        return x509.load_pem_x509_certificate(ca_crt.read_bytes()), key
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubenode-ca")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    write_private(ca_key, _key_pem(key))
    write_private(ca_crt, cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def _serving_is_fresh(path: Path, hosts: set[str]) -> bool:
    if not path.exists():
        return False
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    if cert.not_valid_after_utc - dt.datetime.now(dt.UTC) < RENEW_BEFORE:
        return False
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    have = {str(v) for v in san.get_values_for_type(x509.IPAddress)} | set(
        san.get_values_for_type(x509.DNSName)
    )
    return hosts <= have


def machine_names() -> set[str]:
    """This machine's host name and interface addresses: what clients elsewhere dial when the server
    listens on every address (0.0.0.0 or ::)."""
    names = {socket.gethostname()}
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family in (socket.AF_INET, socket.AF_INET6):
                names.add(address.address.split("%", 1)[0])  # drop an IPv6 zone (fe80::1%eth0)
    return names


def ensure_serving_cert(data_dir: Path, hosts: Sequence[str]) -> ServingCert:
    """CA + serving certificate for `hosts` (IPs or DNS names; a wildcard address means every address of
    this machine) plus localhost, 127.0.0.1 and ::1."""
    pki = data_dir / "pki"
    pki.mkdir(parents=True, exist_ok=True, mode=0o700)
    named = set(hosts)
    if named & {"0.0.0.0", "::"}:
        named |= machine_names()
    wanted = {
        str(ipaddress.ip_address(h)) if _is_ip(h) else h for h in named if h and h not in ("0.0.0.0", "::")
    }
    wanted |= {"localhost", "127.0.0.1", "::1", "kubernetes", "kubernetes.default"}
    result = ServingCert(pki / "ca.crt", pki / "apiserver.crt", pki / "apiserver.key")
    ca_cert, ca_key = _ensure_ca(pki)
    if _serving_is_fresh(result.cert_path, wanted) and result.key_path.exists():
        return result
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=SERVING_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in sorted(wanted)]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    write_private(result.key_path, _key_pem(key))
    write_private(result.cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return result


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def is_loopback(address: str) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`: the only addresses plain HTTP may serve on."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


# kube-apiserver's --kubelet-client-certificate (kubeadm's apiserver-kubelet-client.crt): the identity the
# API server shows an agent's daemon endpoint when it proxies logs, exec, attach and port-forward.
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"
KUBELET_CLIENT_GROUP = "system:masters"


@dataclass(frozen=True)
class ClientCert:
    ca_path: Path
    cert_path: Path
    key_path: Path


def ensure_kubelet_client_cert(data_dir: Path) -> ClientCert:
    """`<data_dir>/pki/apiserver-kubelet-client.{crt,key}`, signed by the CA, made once and renewed
    within RENEW_BEFORE of its end."""
    pki = data_dir / "pki"
    pki.mkdir(parents=True, exist_ok=True, mode=0o700)
    result = ClientCert(
        pki / "ca.crt", pki / "apiserver-kubelet-client.crt", pki / "apiserver-kubelet-client.key"
    )
    ca_cert, ca_key = _ensure_ca(pki)
    if result.cert_path.exists() and result.key_path.exists():
        cert = x509.load_pem_x509_certificate(result.cert_path.read_bytes())
        if cert.not_valid_after_utc - dt.datetime.now(dt.UTC) >= RENEW_BEFORE:
            return result
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, KUBELET_CLIENT_GROUP),
            x509.NameAttribute(NameOID.COMMON_NAME, KUBELET_CLIENT_USER),
        ]
    )
    cert = _issue(
        ca_cert, ca_key, subject, key.public_key(), ExtendedKeyUsageOID.CLIENT_AUTH, [], SERVING_DAYS
    )
    write_private(result.key_path, _key_pem(key))
    write_private(result.cert_path, cert.public_bytes(serialization.Encoding.PEM))
    return result


def _issue(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    public_key: CertificatePublicKeyTypes,
    usage: x509.ObjectIdentifier,
    sans: Sequence[x509.GeneralName],
    days: int,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, True, False, False, False, False, False, False), critical=True
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def sign_kubelet_serving(
    data_dir: Path, csr: x509.CertificateSigningRequest, days: int = SERVING_DAYS
) -> bytes:
    """The kubernetes.io/kubelet-serving signer: a server certificate (PEM) for the CSR's subject and its
    DNS/IP names only, from the cluster CA. The caller has checked who asked and what for."""
    san: list[x509.GeneralName] = []
    try:
        wanted = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        san = [*map(x509.DNSName, wanted.get_values_for_type(x509.DNSName))]
        san += [x509.IPAddress(ip) for ip in wanted.get_values_for_type(x509.IPAddress)]
    except x509.ExtensionNotFound:
        pass
    public_key = csr.public_key()
    if not isinstance(public_key, ec.EllipticCurvePublicKey | rsa.RSAPublicKey):
        raise ValueError("the CSR's key must be an EC or RSA key")
    ca_cert, ca_key = _ensure_ca(data_dir / "pki")
    cert = _issue(ca_cert, ca_key, csr.subject, public_key, ExtendedKeyUsageOID.SERVER_AUTH, san, days)
    return cert.public_bytes(serialization.Encoding.PEM)
