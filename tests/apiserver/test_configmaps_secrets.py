"""ConfigMaps, Secrets and RuntimeClasses through the real kubectl and the official client, against the real
server: create (literal, file, protobuf bodies), apply, get (Tables), describe, edit-style patches, delete,
watch, kube's validation messages, and Secret values that never reach the server's output."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from harness.apiserver import ApiServerProcess
from tests.apiserver.conftest import python_client
from tests.apiserver.kubectl_support import Kubectl

SECRET_VALUE = "hunter2-never-logged"
CM = "/api/v1/namespaces/default/configmaps"
SECRETS = "/api/v1/namespaces/default/secrets"


@pytest.fixture
def kubectl(api: ApiServerProcess, tmp_path: Path) -> Kubectl:
    return Kubectl(api.kubeconfig, tmp_path / "cache")


def test_kubectl_create_get_describe_delete(kubectl: Kubectl, tmp_path: Path) -> None:
    (tmp_path / "app.conf").write_text("port=8080\n")
    kubectl.out(
        "create", "configmap", "web", "--from-literal=mode=fast", f"--from-file={tmp_path / 'app.conf'}"
    )
    kubectl.out("create", "secret", "generic", "db", f"--from-literal=password={SECRET_VALUE}")
    table = kubectl.out("get", "cm", "web")
    assert table.split("\n")[0].split() == ["NAME", "DATA", "AGE"] and table.split("\n")[1].split()[:2] == [
        "web",
        "2",
    ]
    secrets = kubectl.out("get", "secrets", "db").split("\n")
    assert secrets[0].split() == ["NAME", "TYPE", "DATA", "AGE"] and secrets[1].split()[:3] == [
        "db",
        "Opaque",
        "1",
    ]
    assert kubectl.out("get", "cm", "web", "-o", "jsonpath={.data.app\\.conf}") == "port=8080\n"
    encoded = kubectl.out("get", "secret", "db", "-o", "jsonpath={.data.password}")
    assert base64.b64decode(encoded).decode() == SECRET_VALUE
    described = kubectl.out("describe", "secret", "db")
    assert "password:  20 bytes" in described and SECRET_VALUE not in described
    assert "mode:\n----\nfast" in kubectl.out("describe", "configmap", "web")
    kubectl.out("delete", "cm", "web")
    kubectl.out("delete", "secret", "db")
    gone = kubectl.run("get", "cm", "web", check=False)
    assert gone.returncode != 0 and 'configmaps "web" not found' in gone.stderr


def test_apply_folds_string_data_and_edit_patches(kubectl: Kubectl) -> None:
    manifest = (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: tok}\nstringData: {token: abc}\ndata: {other: eHl6}\n"
    )
    kubectl.run("apply", "-f", "-", stdin=manifest)
    status = kubectl.out("get", "secret", "tok", "-o", "jsonpath={.data.token} {.data.other} {.stringData}")
    assert status.split() == [
        base64.b64encode(b"abc").decode(),
        "eHl6",
    ]  # stringData went into data, then away
    kubectl.out("patch", "secret", "tok", "-p", '{"stringData": {"token": "new"}}')
    assert (
        kubectl.out("get", "secret", "tok", "-o", "jsonpath={.data.token}")
        == base64.b64encode(b"new").decode()
    )
    kubectl.run(
        "apply", "-f", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: '1'}\n"
    )
    kubectl.run(
        "apply", "-f", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: '2'}\n"
    )
    assert kubectl.out("get", "cm", "c", "-o", "jsonpath={.data.a}") == "2"


def test_kubes_validation_messages(api: ApiServerProcess, kubectl: Kubectl) -> None:
    status, body = api.request("POST", CM, {"metadata": {"name": "bad"}, "data": {"a b": "1"}})
    assert status == 422
    assert body["message"] == (
        'ConfigMap "bad" is invalid: data[a b]: Invalid value: "a b": a valid config key must consist of '
        "alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', "
        "regex used "
        "for validation is '[-._a-zA-Z0-9]+')"
    )
    status, body = api.request(
        "POST", CM, {"metadata": {"name": "big"}, "data": {"a": "x" * (1024 * 1024 + 1)}}
    )
    assert (
        status == 422
        and body["message"] == 'ConfigMap "big" is invalid: []: Too long: may not be more than 1048576 bytes'
    )
    big = base64.b64encode(b"x" * (1024 * 1024 + 1)).decode()
    status, body = api.request("POST", SECRETS, {"metadata": {"name": "big"}, "data": {"a": big}})
    assert (
        status == 422
        and body["message"] == 'Secret "big" is invalid: data: Too long: may not be more than 1048576 bytes'
    )
    status, body = api.request(
        "POST", CM, {"metadata": {"name": "dup"}, "data": {"k": "1"}, "binaryData": {"k": "MQ=="}}
    )
    assert (
        status == 422
        and 'data[k]: Invalid value: "k": duplicate of key present in binaryData' in body["message"]
    )
    status, body = api.request("POST", SECRETS, {"metadata": {"name": "b64"}, "data": {"k": "no!t base64"}})
    assert status == 400 and body["message"] == (
        'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 2'
    )
    status, body = api.request(
        "POST", SECRETS, {"metadata": {"name": "t"}, "type": "kubernetes.io/tls", "data": {}}
    )
    assert status == 422 and body["message"] == (
        'Secret "t" is invalid: [data[tls.crt]: Required value, data[tls.key]: Required value]'
    )
    kubectl.run(
        "apply",
        "-f",
        "-",
        stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: frozen}\nimmutable: true\ndata: {a: '1'}\n",
    )
    changed = kubectl.run("patch", "cm", "frozen", "-p", '{"data": {"a": "2"}}', check=False)
    assert changed.returncode != 0
    assert (
        'The ConfigMap "frozen" is invalid: data: Forbidden: field is immutable when `immutable` is set'
        in changed.stderr
    )
    thawed = kubectl.run("patch", "cm", "frozen", "-p", '{"immutable": false}', check=False)
    assert "immutable: Forbidden: field is immutable when `immutable` is set" in thawed.stderr
    kubectl.out("create", "secret", "generic", "typed", "--from-literal=a=b")
    retyped = kubectl.run(
        "patch", "secret", "typed", "-p", '{"type": "kubernetes.io/basic-auth"}', check=False
    )
    assert 'type: Invalid value: "kubernetes.io/basic-auth": field is immutable' in retyped.stderr


def test_secret_values_never_reach_the_servers_output(api: ApiServerProcess) -> None:
    value = base64.b64encode(SECRET_VALUE.encode()).decode()
    for body in (
        {"metadata": {"name": "leak1"}, "data": {"bad key": value}},
        {"metadata": {"name": "leak2"}, "stringData": {"k": SECRET_VALUE}, "type": "kubernetes.io/tls"},
        {"metadata": {"name": "leak3"}, "data": {"k": SECRET_VALUE + "!"}},
    ):
        status, answer = api.request("POST", SECRETS, body)
        assert status in (400, 422) and SECRET_VALUE not in str(answer) and value not in str(answer)
    assert not any(SECRET_VALUE in line or value in line for line in api.output)


def test_watch_sees_configmap_changes(api: ApiServerProcess) -> None:
    from kubernetes import client, watch

    core: Any = client.CoreV1Api(python_client(str(api.kubeconfig)))
    start = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", {"metadata": {"name": "watched"}, "data": {"a": "1"}})
    core.patch_namespaced_config_map("watched", "default", {"data": {"a": "2"}})
    core.delete_namespaced_config_map("watched", "default")
    seen: list[tuple[str, Any]] = []
    stream: Any = watch.Watch()  # type: ignore[no-untyped-call]
    for event in stream.stream(
        core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=30
    ):
        if event["object"].metadata.name == "watched":
            seen.append((event["type"], (event["object"].data or {}).get("a")))
        if len(seen) == 3:
            stream.stop()
    assert seen == [("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "2")]


def test_runtimeclasses(kubectl: Kubectl, api: ApiServerProcess) -> None:
    kubectl.run(
        "apply",
        "-f",
        "-",
        stdin="apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: sandboxed}\nhandler: runsc\n",
    )
    rows = kubectl.out("get", "runtimeclass").split("\n")
    assert rows[0].split() == ["NAME", "HANDLER", "AGE"] and rows[1].split()[:2] == ["sandboxed", "runsc"]
    resources = kubectl.out("api-resources", "--api-group=node.k8s.io")
    assert "runtimeclasses" in resources and "RuntimeClass" in resources
    changed = kubectl.run(
        "patch", "runtimeclass", "sandboxed", "--type=merge", "-p", '{"handler": "kata"}', check=False
    )
    assert 'handler: Invalid value: "kata": field is immutable' in changed.stderr
    status, body = api.request(
        "POST", "/apis/node.k8s.io/v1/runtimeclasses", {"metadata": {"name": "bad"}, "handler": "Not_A_Label"}
    )
    assert (
        status == 422
        and 'handler: Invalid value: "Not_A_Label": a lowercase RFC 1123 label' in body["message"]
    )
    kubectl.out("delete", "runtimeclass", "sandboxed")


def test_discovery_and_openapi(kubectl: Kubectl) -> None:
    resources = kubectl.out("api-resources", "--api-group=")
    assert any(line.split()[:2] == ["configmaps", "cm"] for line in resources.split("\n"))
    assert "secrets" in resources
    explained = kubectl.out("explain", "configmap.binaryData")
    assert "map[string]string" in explained or "map[string]" in explained


def test_the_database_holding_secrets_is_private(api: ApiServerProcess) -> None:
    import stat

    for name in ("state.db", "state.db-wal"):
        assert stat.S_IMODE((api.data_dir / name).stat().st_mode) == 0o600, name


def test_kubectl_edit_and_typed_secrets(api: ApiServerProcess, kubectl: Kubectl) -> None:
    kubectl.out("create", "configmap", "edited", "--from-literal=mode=fast")
    kubectl.run("edit", "cm", "edited", env={"KUBE_EDITOR": "sed -i s/fast/slow/"})
    assert kubectl.out("get", "cm", "edited", "-o", "jsonpath={.data.mode}") == "slow"
    pki = api.data_dir / "pki"  # any certificate and key will do: the server's own
    kubectl.out(
        "create", "secret", "tls", "cert", f"--cert={pki / 'apiserver.crt'}", f"--key={pki / 'apiserver.key'}"
    )
    kubectl.out(
        "create",
        "secret",
        "docker-registry",
        "reg",
        "--docker-server=r.example",
        "--docker-username=u",
        "--docker-password=p",
    )
    rows = {
        line.split()[0]: line.split()[1:3]
        for line in kubectl.out("get", "secrets", "cert", "reg").splitlines()[1:]
    }
    assert rows == {"cert": ["kubernetes.io/tls", "2"], "reg": ["kubernetes.io/dockerconfigjson", "1"]}
