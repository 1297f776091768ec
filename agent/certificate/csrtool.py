"""The serving certificate's cryptography, run in a child process: `python -m agent.certificate.csrtool`.

The agent makes a key and a CSR once when it joins, and checks its certificate at start; the
cryptography package that does it maps ~10 MiB into a process for good. Run here instead, the
daemon never loads it. Two commands, JSON on stdout:

    fresh CERT RENEW_DAYS NAME...   {"fresh": true} if CERT parses, is valid for RENEW_DAYS more days
                                    and names every NAME (IP or DNS) in its subjectAltName
    request NODE NAME...            {"key": PEM (PKCS#8 EC P-256), "csr": PEM} for CN system:node:NODE,
                                    O system:nodes, the NAMEs as subjectAltName
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def is_fresh(path: Path, renew_before: dt.timedelta, names: set[str]) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    have = {str(v) for v in san.get_values_for_type(x509.IPAddress)} | set(
        san.get_values_for_type(x509.DNSName)
    )
    return cert.not_valid_after_utc - dt.datetime.now(dt.UTC) >= renew_before and names <= have


def request(node: str, names: list[str]) -> dict[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node}"),
        ]
    )
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(subject)
        .add_extension(x509.SubjectAlternativeName([_general_name(n) for n in sorted(names)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return {"key": key_pem.decode(), "csr": csr.public_bytes(serialization.Encoding.PEM).decode()}


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "fresh":
        fresh = is_fresh(Path(argv[1]), dt.timedelta(days=float(argv[2])), set(argv[3:]))
        print(json.dumps({"fresh": fresh}))
        return 0
    if len(argv) >= 2 and argv[0] == "request":
        print(json.dumps(request(argv[1], argv[2:])))
        return 0
    print(
        "usage: python -m agent.certificate.csrtool fresh CERT DAYS NAME... | request NODE NAME...",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
