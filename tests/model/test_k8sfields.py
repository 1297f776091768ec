"""The generated field-name table matches the installed kubernetes client, and parsing manifests no longer
imports the client (the node agent's RSS: issue 12 item 16)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from tests.importprobe import modules_loaded

ROOT = Path(__file__).resolve().parents[2]


def _genfields() -> Any:
    spec = importlib.util.spec_from_file_location("genfields", ROOT / "tools/genfields.py")
    assert spec is not None and spec.loader is not None
    genfields = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(genfields)
    return genfields


def test_the_table_holds_what_the_installed_clients_models_give() -> None:
    """Content, not a version string: a new patch release of the client with the same fields passes."""
    from kubenode.model.k8sfields import FIELDS

    assert _genfields().fields() == FIELDS, (
        "kubenode/model/k8sfields.py is stale: run .venv/bin/python tools/genfields.py"
    )


def test_the_committed_table_is_rendered_as_tools_genfields_renders_it() -> None:
    assert (ROOT / "kubenode/model/k8sfields.py").read_text() == _genfields().render()


def test_the_accepted_client_versions_are_the_api_line_the_table_was_made_from() -> None:
    """The fields follow the client's major version (kubernetes 37.x is Kubernetes 1.37's API): the
    project accepts that line only, so a new major release cannot reach a fresh venv unreviewed."""
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    client = next(d for d in deps if d.startswith("kubernetes"))
    header = (ROOT / "kubenode/model/k8sfields.py").read_text().splitlines()[0]
    major = header.split("kubernetes ")[1].split(".")[0]
    assert client == f"kubernetes>={major}.0.2,<{int(major) + 1}", client


def test_parsing_pods_and_nodes_does_not_import_the_kubernetes_client() -> None:
    code = (
        "from kubenode.model import parse_pod, parse_node\n"
        "from kubenode.model.errors import ValidationError\n"
        "parse_pod({'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'p'}, 'spec': {'containers':"
        " [{'name': 'c', 'command': ['true'], 'resources': {'limits': {'cpu': '1'}},"
        " 'env': [{'name': 'A', 'valueFrom': {'fieldRef': {'fieldPath': 'metadata.name'}}}]}],"
        " 'affinity': {'nodeAffinity': {}}, 'tolerations': [{'operator': 'Exists'}]}}, 'p.yaml')\n"
        "parse_node({'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': 'n'},"
        " 'spec': {'taints': [{'key': 'k', 'effect': 'NoSchedule'}]}}, 'n.yaml')\n"
        "try:\n"
        "    parse_pod({'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'p'},"
        " 'spec': {'containers': [{'name': 'c', 'comand': ['x']}]}}, 'typo.yaml')\n"
        "except ValidationError as exc:\n"
        "    print(exc)\n"
    )
    printed, loaded = modules_loaded(code, ["kubernetes", "pydantic", "urllib3"])
    assert printed == ["typo.yaml: spec.containers[0].comand: unknown field"] and loaded == []
