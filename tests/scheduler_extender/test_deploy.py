"""deploy/extender/: the manifests agree with the code (routes, port, RBAC verbs, config fields)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from scheduler.cli import register
from scheduler.profile import parse_configuration

DEPLOY = Path(__file__).parents[2] / "deploy" / "extender"


def documents(name: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((DEPLOY / name).read_text()))


def test_kube_scheduler_config_calls_our_extender_as_the_issue_asks() -> None:
    config = yaml.safe_load((DEPLOY / "kube-scheduler-config.yaml").read_text())
    # Keys only kube-scheduler reads; the rest is parsed by our own KubeSchedulerConfiguration reader.
    config.pop("clientConnection")
    config.pop("leaderElection")
    (extender,) = parse_configuration(config, "kube-scheduler-config.yaml").extenders
    assert (extender.filter_verb, extender.prioritize_verb, extender.bind_verb) == (
        "filter",
        "prioritize",
        "bind",
    )
    assert extender.node_cache_capable and not extender.ignorable
    assert extender.weight > 0 and 0 < extender.http_timeout <= 5
    assert extender.ignored_resources == {"kubenode.io/gpu", "kubenode.io/cpu"}
    (service,) = [d for d in documents("deployment.yaml") if d["kind"] == "Service"]
    name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
    port = service["spec"]["ports"][0]["port"]
    assert extender.url_prefix == f"http://{name}.{namespace}.svc:{port}"


def test_deployment_runs_the_extender_command_on_the_service_port() -> None:
    config_map, deployment, service = documents("deployment.yaml")
    assert deployment["spec"]["replicas"] == 1  # the assume cache is per process
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(container["args"])
    assert args.func.__name__ == "run_extender"
    assert container["ports"][0]["containerPort"] == args.port
    assert service["spec"]["ports"][0]["targetPort"] == container["ports"][0]["name"]
    mount = container["volumeMounts"][0]["mountPath"]
    profile_file = Path(args.profile)
    assert str(profile_file.parent) == mount and profile_file.name in config_map["data"]
    profile = parse_configuration(yaml.safe_load(config_map["data"][profile_file.name]), "profile.yaml")
    assert profile.profiles["default-scheduler"].scoring.type == "MostAllocated"


def test_rbac_grants_only_what_the_extender_uses() -> None:
    account, role, binding = documents("rbac.yaml")
    granted = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    # Informers (list + watch) on nodes and pods, GET of a pod /bind names, POST of pods/binding.
    used = {("nodes", "list"), ("nodes", "watch"), ("pods", "list"), ("pods", "watch")}
    used |= {("pods", "get"), ("pods/binding", "create")}
    assert granted == used
    assert binding["subjects"][0]["name"] == account["metadata"]["name"]
    deployment = documents("deployment.yaml")[1]
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]
