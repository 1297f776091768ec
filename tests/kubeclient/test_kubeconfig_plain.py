"""Plain kubeconfigs read without the official client give what the official loader gives."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from kubenode.kubeclient.config import ClientConfig, _from_official, load_kubeconfig
from kubenode.kubeclient.kubeconfig import read_plain

CA = b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
CERT = b"-----BEGIN CERTIFICATE-----\nCERT\n-----END CERTIFICATE-----\n"
KEY = b"-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(cluster: dict[str, Any], user: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": cluster},
            {"name": "other", "cluster": {"server": "https://x:1"}},
        ],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "main",
        **extra,
    }


def official(path: Path) -> ClientConfig:
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=cfg, persist_config=False)  # type: ignore[no-untyped-call]
    return _from_official(cfg)


def contents(path: str | None) -> bytes | None:
    return Path(path).read_bytes() if path else None


def same(ours: ClientConfig, theirs: ClientConfig) -> None:
    assert ours.official is None  # read without the official client
    assert (ours.host, ours.verify_ssl, ours.tls_server_name) == (
        theirs.host,
        theirs.verify_ssl,
        theirs.tls_server_name,
    )
    for name in ("ca_file", "cert_file", "key_file"):
        assert contents(getattr(ours, name)) == contents(getattr(theirs, name)), name
    assert ours.authorization() == theirs.authorization()


@pytest.mark.parametrize(
    ("cluster", "user"),
    [
        ({"server": "https://127.0.0.1:6443", "certificate-authority-data": b64(CA)}, {"token": "abc.def"}),
        (
            {"server": "https://10.0.0.1:6443/", "certificate-authority": "ca.crt", "tls-server-name": "api"},
            {"client-certificate": "tls.crt", "client-key": "tls.key"},
        ),
        (
            {"server": "https://h:443", "insecure-skip-tls-verify": True},
            {"client-certificate-data": b64(CERT), "client-key-data": b64(KEY)},
        ),
        ({"server": "http://127.0.0.1:8080"}, {"username": "admin", "password": "secret"}),
    ],
    ids=["token-ca-data", "cert-files-relative", "cert-data-insecure", "basic"],
)
def test_plain_forms_match_the_official_loader(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any]
) -> None:
    (tmp_path / "ca.crt").write_bytes(CA)
    (tmp_path / "tls.crt").write_bytes(CERT)
    (tmp_path / "tls.key").write_bytes(KEY)
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig(cluster, user)))
    assert read_plain(path, None) is not None
    same(load_kubeconfig(path), official(path))


def test_other_forms_go_to_the_official_loader(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    exec_user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "true"}}
    path.write_text(yaml.safe_dump(kubeconfig({"server": "https://h:1"}, exec_user)))
    assert read_plain(path, None) is None
    path.write_text(yaml.safe_dump(kubeconfig({"server": "https://h:1"}, {"tokenFile": "/t"})))
    assert read_plain(path, None) is None
    path.write_text("current-context: nowhere\n")
    assert read_plain(path, None) is None


def test_a_named_context_is_used(tmp_path: Path) -> None:
    doc = kubeconfig({"server": "https://h:1"}, {"token": "t"})
    doc["contexts"].append({"name": "second", "context": {"cluster": "other", "user": "u"}})
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    assert load_kubeconfig(path, context="second").host == "https://x:1"
    assert load_kubeconfig(path).host == "https://h:1"
