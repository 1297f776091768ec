"""The generated field-name table matches the installed kubernetes client, and parsing manifests no longer
imports the client (the node agent's RSS: issue 12 item 16)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.importprobe import modules_loaded

ROOT = Path(__file__).resolve().parents[2]


def test_the_table_is_what_tools_genfields_makes_now() -> None:
    spec = importlib.util.spec_from_file_location("genfields", ROOT / "tools/genfields.py")
    assert spec is not None and spec.loader is not None
    genfields = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(genfields)
    assert (ROOT / "kubenode/model/k8sfields.py").read_text() == genfields.render(), (
        "kubenode/model/k8sfields.py is stale: run .venv/bin/python tools/genfields.py"
    )


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
