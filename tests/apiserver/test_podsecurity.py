"""Pod Security admission in the real server, driven by the real kubectl: enforce refuses with kube's
"violates PodSecurity" message, warn comes back as `Warning:` lines, audit as audit-log annotations,
bad labels are refused, raising enforce warns about existing pods, and the configured exemptions hold."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.apiserver import ApiServerProcess
from tests.apiserver.kubectl_support import Kubectl

CONFIG = """\
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults: {enforce: privileged, audit: baseline}
    exemptions: {usernames: [ci-bot], namespaces: [tools], runtimeClasses: [trusted]}
"""
RESTRICTED_MESSAGE = (
    'Error from server (Forbidden): pods "priv" is forbidden: violates PodSecurity "restricted:latest": '
    'privileged (container "priv" must not set securityContext.privileged=true), '
    'allowPrivilegeEscalation != false (container "priv" must set '
    "securityContext.allowPrivilegeEscalation=false), "
    'unrestricted capabilities (container "priv" must set securityContext.capabilities.drop=["ALL"]), '
    'runAsNonRoot != true (pod or container "priv" must set securityContext.runAsNonRoot=true), '
    'seccompProfile (pod or container "priv" must set securityContext.seccompProfile.type to '
    '"RuntimeDefault" '
    'or "Localhost")'
)
LABEL = "pod-security.kubernetes.io/"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerProcess]:
    config = tmp_path_factory.mktemp("config") / "admission.yaml"
    config.write_text(CONFIG)
    with ApiServerProcess(args=["--admission-control-config-file", str(config)]) as server:
        yield server


@pytest.fixture
def kubectl(api: ApiServerProcess, tmp_path: Path) -> Kubectl:
    return Kubectl(api.kubeconfig, tmp_path / "cache")


def test_enforce_restricted_refuses_a_privileged_kubectl_run(kubectl: Kubectl) -> None:
    kubectl.out("create", "namespace", "locked")
    kubectl.out("label", "namespace", "locked", f"{LABEL}enforce=restricted")
    refused = kubectl.run(
        "run", "priv", "-n", "locked", "--image=busybox", "--privileged", "--restart=Never", check=False
    )
    assert refused.returncode == 1 and refused.stderr.strip() == RESTRICTED_MESSAGE
    assert "priv" not in kubectl.out("get", "pods", "-n", "locked")
    compliant = """\
apiVersion: v1
kind: Pod
metadata: {name: ok, namespace: locked}
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: m
    image: busybox
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
"""
    assert kubectl.run("apply", "-f", "-", stdin=compliant).stdout == "pod/ok created\n"


def test_warn_and_audit(api: ApiServerProcess, kubectl: Kubectl) -> None:
    kubectl.out("create", "namespace", "watched")
    kubectl.out("label", "namespace", "watched", f"{LABEL}warn=baseline", f"{LABEL}audit=restricted")
    created = kubectl.run(
        "run", "loud", "-n", "watched", "--image=busybox", "--privileged", "--restart=Never"
    )
    assert created.stdout == "pod/loud created\n"
    assert created.stderr == (
        'Warning: would violate PodSecurity "baseline:latest": privileged (container "loud" must not set '
        "securityContext.privileged=true)\n"
    )
    audit = [line for line in api.output if "ADMISSION create pods watched/loud" in line]
    assert len(audit) == 1
    assert (
        "pod-security.kubernetes.io/audit-violations="
        '\'would violate PodSecurity "restricted:latest": privileged' in audit[0]
    )
    assert "pod-security.kubernetes.io/enforce-policy='privileged:latest'" in audit[0]


def test_default_audit_level_from_the_config_file(api: ApiServerProcess, kubectl: Kubectl) -> None:
    kubectl.out(
        "run",
        "hostnet",
        "--image=busybox",
        "--restart=Never",
        "--overrides",
        '{"spec": {"hostNetwork": true}}',
    )
    audit = [line for line in api.output if "ADMISSION create pods default/hostnet" in line]
    assert (
        audit
        and 'would violate PodSecurity "baseline:latest": host namespaces (hostNetwork=true)' in audit[0]
    )


def test_bad_labels_are_refused_and_raising_enforce_warns(kubectl: Kubectl) -> None:
    kubectl.out("create", "namespace", "mixed")
    kubectl.out("run", "root1", "-n", "mixed", "--image=busybox", "--restart=Never")
    kubectl.out("run", "root2", "-n", "mixed", "--image=busybox", "--restart=Never")
    bad = kubectl.run("label", "namespace", "mixed", f"{LABEL}enforce=strict", check=False)
    assert bad.returncode == 1 and bad.stderr.strip() == (
        f'The Namespace "mixed" is invalid: metadata.labels[{LABEL}enforce]: Invalid value: "strict": '
        "must be one of privileged, baseline, restricted"
    )
    raised = kubectl.run("label", "namespace", "mixed", f"{LABEL}enforce=restricted")
    assert raised.stderr.splitlines() == [
        'Warning: existing pods in namespace "mixed" violate the new PodSecurity enforce level '
        '"restricted:latest"',
        "Warning: root1 (and 1 other pod): allowPrivilegeEscalation != false, unrestricted capabilities, "
        "runAsNonRoot != true, seccompProfile",
    ]
    # Existing pods stay; a label change passes, a new image is judged (kube's significant updates).
    assert kubectl.run("label", "pod", "root1", "-n", "mixed", "tier=web").returncode == 0
    changed = kubectl.run("set", "image", "pod/root1", "-n", "mixed", "root1=busybox:2", check=False)
    assert changed.returncode == 1
    assert (
        'pods "root1" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation'
        in (changed.stderr)
    )


def test_exemptions(api: ApiServerProcess, kubectl: Kubectl, tmp_path: Path) -> None:
    for namespace in ("tools", "exempt-runtime"):
        kubectl.out("create", "namespace", namespace)
    exempt_ns = kubectl.run("label", "namespace", "tools", f"{LABEL}enforce=restricted")
    assert (
        'namespace "tools" is exempt from Pod Security, and the policy (enforce=restricted:latest) '
        "will be ignored" in exempt_ns.stderr
    )
    assert (
        kubectl.out("run", "p", "-n", "tools", "--image=busybox", "--privileged", "--restart=Never")
        == "pod/p created\n"
    )
    kubectl.out("label", "namespace", "exempt-runtime", f"{LABEL}enforce=baseline")
    trusted = '{"spec": {"runtimeClassName": "trusted", "hostPID": true}}'
    kubectl.out(
        "run", "t", "-n", "exempt-runtime", "--image=busybox", "--restart=Never", "--overrides", trusted
    )
    host_pid = '{"spec": {"hostPID": true}}'
    other = kubectl.run(
        "run",
        "u",
        "-n",
        "exempt-runtime",
        "--image=busybox",
        "--restart=Never",
        "--overrides",
        host_pid,
        check=False,
    )
    assert 'violates PodSecurity "baseline:latest": host namespaces (hostPID=true)' in other.stderr
    ci = Kubectl(api.kubeconfig_for("ci-bot", ["system:masters"]), tmp_path / "ci-cache")
    assert (
        ci.out("run", "v", "-n", "exempt-runtime", "--image=busybox", "--privileged", "--restart=Never")
        == "pod/v created\n"
    )
    audit = [line for line in api.output if "ADMISSION create pods exempt-runtime/v" in line]
    assert audit and "pod-security.kubernetes.io/exempt='user'" in audit[0]


def test_a_bad_config_file_stops_the_start(tmp_path: Path) -> None:
    config = tmp_path / "admission.yaml"
    config.write_text("kind: PodSecurityConfiguration\nexemptions: {namespaces: nope}\n")
    with pytest.raises(
        RuntimeError,
        match=r"--admission-control-config-file: .*admission.yaml: exemptions.namespaces: expected a list",
    ):
        ApiServerProcess(args=["--admission-control-config-file", str(config)])
