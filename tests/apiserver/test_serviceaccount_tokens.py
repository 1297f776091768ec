"""Bound ServiceAccount tokens on the real server: `kubectl create token` and its JWT's claims, the OIDC
documents (the signature checked with the served JWKS), authentication as the ServiceAccount, refusal
once the bound pod is gone or replaced, of an unknown audience and of a forged token, NodeRestriction's
rule for node-requested tokens, and the ServiceAccount admission plugin (default account, the projected
`kube-api-access-*` volume and its mounts, `automountServiceAccountToken: false`, an unknown account)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from harness.apiserver import ApiServerProcess
from tests.apiserver.kubectl_support import Kubectl

ISSUER = "https://kubernetes.default.svc.cluster.local"
MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def claims_of(token: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(_unb64(token.split(".")[1]))
    return result


@pytest.fixture(scope="module")
def api(own_api: ApiServerProcess) -> ApiServerProcess:
    return own_api  # not the package's shared server: its objects are named as other modules' are


@pytest.fixture(scope="module", autouse=True)
def accounts(api: ApiServerProcess) -> None:
    """No controller manager runs here: the `default` ServiceAccount is made as its controller would."""
    for name in ("default", "robot"):
        body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}
        status, _ = api.request("POST", "/api/v1/namespaces/default/serviceaccounts", body)
        assert status in (201, 409)


@pytest.fixture
def kubectl(api: ApiServerProcess, tmp_path: Path) -> Kubectl:
    return Kubectl(api.kubeconfig, tmp_path / "cache")


def make_pod(api: ApiServerProcess, name: str, **spec: Any) -> dict[str, Any]:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec},
    }
    status, pod = api.request("POST", "/api/v1/namespaces/default/pods", body)
    assert status == 201, pod
    result: dict[str, Any] = pod
    return result


def whoami(api: ApiServerProcess, token: str) -> tuple[int, Any]:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    return api.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body, token=token)


def token_request(
    api: ApiServerProcess, account: str, spec: dict[str, Any], token: str | None = None
) -> tuple[int, Any]:
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    path = f"/api/v1/namespaces/default/serviceaccounts/{account}/token"
    return api.request("POST", path, body, token=token)


def test_kubectl_create_token_has_kubes_claims(api: ApiServerProcess, kubectl: Kubectl) -> None:
    token = kubectl.out("create", "token", "default", "--duration=10m").strip()
    header = json.loads(_unb64(token.split(".")[0]))
    claims = claims_of(token)
    assert header["alg"] == "RS256" and header["kid"]
    assert set(claims) == {"aud", "exp", "iat", "iss", "jti", "kubernetes.io", "nbf", "sub"}
    assert claims["iss"] == ISSUER and claims["aud"] == [ISSUER]
    assert claims["exp"] - claims["iat"] == 600 and claims["nbf"] == claims["iat"]
    assert claims["sub"] == "system:serviceaccount:default:default"
    _, account = api.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")
    assert claims["kubernetes.io"] == {
        "namespace": "default",
        "serviceaccount": {"name": "default", "uid": account["metadata"]["uid"]},
    }
    status, review = whoami(api, token)
    assert status == 201, review
    assert review["status"]["userInfo"]["username"] == "system:serviceaccount:default:default"
    assert set(review["status"]["userInfo"]["groups"]) == {
        "system:serviceaccounts",
        "system:serviceaccounts:default",
        "system:authenticated",
    }
    # RBAC applies as to any user: nothing grants it pods.
    status, answer = api.request("GET", "/api/v1/namespaces/default/pods", token=token)
    assert status == 403
    assert 'User "system:serviceaccount:default:default" cannot list resource "pods"' in answer["message"]


def test_short_duration_and_unknown_account_are_refused(kubectl: Kubectl, api: ApiServerProcess) -> None:
    result = kubectl.run("create", "token", "default", "--duration=5m", check=False)
    assert result.returncode != 0 and "may not specify a duration less than 10 minutes" in result.stderr
    status, answer = token_request(api, "nobody", {})
    assert status == 404 and answer["reason"] == "NotFound"


def test_oidc_documents_verify_the_signature(api: ApiServerProcess, kubectl: Kubectl) -> None:
    token = kubectl.out("create", "token", "default").strip()
    status, config = api.request("GET", "/.well-known/openid-configuration", token=token)
    assert status == 200
    assert config["issuer"] == ISSUER and config["jwks_uri"] == ISSUER + "/openid/v1/jwks"
    assert config["id_token_signing_alg_values_supported"] == ["RS256"]
    status, jwks = api.request("GET", "/openid/v1/jwks", token=token)
    assert status == 200
    (key,) = jwks["keys"]
    assert key["kid"] == json.loads(_unb64(token.split(".")[0]))["kid"]
    public = rsa.RSAPublicNumbers(
        int.from_bytes(_unb64(key["e"]), "big"), int.from_bytes(_unb64(key["n"]), "big")
    ).public_key()
    head, body, signature = token.split(".")
    public.verify(_unb64(signature), f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
    # Anonymous callers get nothing (the documents are bound to system:serviceaccounts).
    assert api.request("GET", "/openid/v1/jwks", token="")[0] == 401


def test_forged_wrong_audience_and_expired_tokens_are_refused(
    api: ApiServerProcess, kubectl: Kubectl
) -> None:
    token = kubectl.out("create", "token", "default").strip()
    head, _, signature = token.split(".")
    claims = claims_of(token)
    forged_body = base64.urlsafe_b64encode(json.dumps({**claims, "sub": "x"}).encode()).rstrip(b"=").decode()
    assert whoami(api, f"{head}.{forged_body}.{signature}")[0] == 401
    vault = kubectl.out("create", "token", "default", "--audience=vault").strip()
    assert claims_of(vault)["aud"] == ["vault"]
    assert whoami(api, vault)[0] == 401


def test_pod_bound_token_dies_with_its_pod(api: ApiServerProcess) -> None:
    pod = make_pod(api, "bound")
    ref = {"apiVersion": "v1", "kind": "Pod", "name": "bound", "uid": pod["metadata"]["uid"]}
    status, answer = token_request(api, "default", {"boundObjectRef": ref, "expirationSeconds": 1200})
    assert status == 201, answer
    token = answer["status"]["token"]
    claims = claims_of(token)
    assert claims["kubernetes.io"]["pod"] == {"name": "bound", "uid": pod["metadata"]["uid"]}
    assert claims["exp"] - claims["iat"] == 1200
    assert whoami(api, token)[0] == 201
    wrong = {**ref, "uid": "00000000-0000-0000-0000-000000000000"}
    assert token_request(api, "default", {"boundObjectRef": wrong})[0] == 409
    assert token_request(api, "robot", {"boundObjectRef": ref})[0] == 400
    status, _ = api.request("DELETE", "/api/v1/namespaces/default/pods/bound?gracePeriodSeconds=0")
    assert status == 200
    make_pod(api, "bound")  # the same name, a new uid: the old token stays refused
    assert whoami(api, token)[0] == 401


def test_node_may_request_tokens_only_for_its_pods(api: ApiServerProcess) -> None:
    node_token = api.token_for("system:node:alpha", ["system:nodes"])
    for node in ("alpha", "beta"):
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}}
        assert api.request("POST", "/api/v1/nodes", body)[0] in (201, 409)
    volume = {
        "name": "vault",
        "projected": {"sources": [{"serviceAccountToken": {"path": "t", "audience": "vault"}}]},
    }
    mine = make_pod(api, "on-alpha", nodeName="alpha", volumes=[volume])
    theirs = make_pod(api, "on-beta", nodeName="beta")

    def ref(pod: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": pod["metadata"]["name"],
            "uid": pod["metadata"]["uid"],
        }

    status, answer = token_request(api, "default", {"boundObjectRef": ref(mine)}, node_token)
    assert status == 201, answer
    node = claims_of(answer["status"]["token"])["kubernetes.io"]["node"]
    assert node["name"] == "alpha" and node["uid"]
    assert (
        token_request(api, "default", {"boundObjectRef": ref(mine), "audiences": ["vault"]}, node_token)[0]
        == 201
    )
    status, answer = token_request(
        api, "default", {"boundObjectRef": ref(mine), "audiences": ["other"]}, node_token
    )
    assert status == 403 and 'audience "other" not found in pod spec volume' in answer["message"]
    status, answer = token_request(api, "default", {"boundObjectRef": ref(theirs)}, node_token)
    assert status == 403 and "scheduled on a different node" in answer["message"]
    status, answer = token_request(api, "default", {}, node_token)
    assert status == 403 and "node requested token not bound to a pod" in answer["message"]


def test_admission_mounts_the_api_access_volume(api: ApiServerProcess) -> None:
    pod = make_pod(api, "plain", initContainers=[{"name": "init", "image": "busybox"}])
    spec = pod["spec"]
    assert spec["serviceAccountName"] == "default"
    (volume,) = spec["volumes"]
    assert (
        volume["name"].startswith("kube-api-access-") and len(volume["name"]) == len("kube-api-access-") + 5
    )
    sources = volume["projected"]["sources"]
    assert sources[0] == {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}
    assert sources[1]["configMap"]["name"] == "kube-root-ca.crt"
    assert sources[2]["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert volume["projected"]["defaultMode"] == 420
    for container in (*spec["initContainers"], *spec["containers"]):
        assert {"name": volume["name"], "readOnly": True, "mountPath": MOUNT} in container["volumeMounts"]


def test_admission_respects_automount_false_and_refuses_unknown_accounts(api: ApiServerProcess) -> None:
    spec = make_pod(api, "no-token", automountServiceAccountToken=False)["spec"]
    assert "volumes" not in spec or not spec["volumes"]
    assert all(not c.get("volumeMounts") for c in spec["containers"])
    body = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "quiet"},
        "automountServiceAccountToken": False,
    }
    assert api.request("POST", "/api/v1/namespaces/default/serviceaccounts", body)[0] == 201
    assert not make_pod(api, "quiet-pod", serviceAccountName="quiet")["spec"].get("volumes")
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ghost"},
        "spec": {"serviceAccountName": "ghost", "containers": [{"name": "c", "image": "busybox"}]},
    }
    status, answer = api.request("POST", "/api/v1/namespaces/default/pods", body)
    assert status == 403
    assert answer["message"] == (
        'pods "ghost" is forbidden: error looking up service account default/ghost: '
        'serviceaccount "ghost" not found'
    )


def grant_pod_reads(kubectl: Kubectl, account: str) -> None:
    """What a kube user runs to let `default:<account>` read pods in default: a Role and a RoleBinding,
    created through the API (rbac.authorization.k8s.io/v1)."""
    if kubectl.run("get", "role", "pod-reader", check=False).returncode != 0:
        kubectl.out("create", "role", "pod-reader", "--verb=get,list,watch", "--resource=pods")
    kubectl.out(
        "create",
        "rolebinding",
        f"{account}-reads-pods",
        "--role=pod-reader",
        f"--serviceaccount=default:{account}",
    )


def test_a_role_binding_created_later_lets_the_account_list_pods(
    api: ApiServerProcess, kubectl: Kubectl
) -> None:
    _, answer = token_request(api, "robot", {})
    token = answer["status"]["token"]
    assert api.request("GET", "/api/v1/namespaces/default/pods", token=token)[0] == 403
    grant_pod_reads(kubectl, "robot")
    assert api.request("GET", "/api/v1/namespaces/default/pods", token=token)[0] == 200
    assert api.request("GET", "/api/v1/namespaces/kube-system/pods", token=token)[0] == 403
