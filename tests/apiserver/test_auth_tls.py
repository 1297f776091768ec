"""TLS on a non-loopback address with the data dir's CA (the CA's reuse is in test_auth_units)."""

from __future__ import annotations

import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
from cryptography import x509

from harness.apiserver import ApiServerProcess
from tests.apiserver.kubectl_support import Kubectl


def non_loopback_ipv4() -> str:
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                return str(address.address)
    pytest.fail("this test needs a non-loopback IPv4 address on some interface (none found)")


def test_non_loopback_address_serves_tls_that_kubectl_trusts(tmp_path: Path) -> None:
    address = non_loopback_ipv4()
    with ApiServerProcess(args=["--bind-address", address]) as api:
        assert api.url.startswith(f"https://{address}:")
        cert = x509.load_pem_x509_certificate((api.data_dir / "pki" / "apiserver.crt").read_bytes())
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert address in {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
        out = Kubectl(api.kubeconfig, tmp_path / "cache").out("get", "namespaces", "-o", "name")
        assert "namespace/kube-node-lease" in out.split()
        # Plain HTTP to the TLS port gets no API answer.
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(f"http://{address}:{api.port}/api", timeout=5).read()
        # An unverified CA is refused by the client: the certificate really comes from the data dir's CA.
        with pytest.raises(urllib.error.URLError) as refused:
            urllib.request.urlopen(api.url + "/version", timeout=5, context=ssl.create_default_context())
        assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)
