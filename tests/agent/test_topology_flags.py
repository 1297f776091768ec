"""`kubenode agent` refuses a bad Topology Manager setting in one line with exit 2 naming the flag or the
config key and the value, as the kubelet's NewManager refuses it (more NUMA nodes than allowed included)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main


def _one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def nine_node_sysfs(root: Path) -> Path:
    for node in range(9):
        (root / "devices/system/node" / f"node{node}").mkdir(parents=True)
    return root


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--topology-manager-policy", "strict"], '--topology-manager-policy: unknown policy: "strict"'),
        (["--topology-manager-scope", "node"], '--topology-manager-scope: unknown scope: "node"'),
        (
            ["--topology-manager-policy-options", "prefer-fast=true"],
            '--topology-manager-policy-options: unknown Topology Manager Policy option: "prefer-fast"',
        ),
        (
            ["--topology-manager-policy-options", "prefer-closest-numa-nodes=maybe"],
            '--topology-manager-policy-options: bad value for option "prefer-closest-numa-nodes"',
        ),
    ],
)
def test_bad_flags(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flags: list[str], expected: str
) -> None:
    err = _one_line_error(capsys, "agent", "--state-dir", str(tmp_path), *flags)
    assert err.startswith(f"kubenode agent: {expected}"), err


def test_bad_config_keys(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("topologyManagerPolicy: single-numa-node\ntopologyManagerScope: node\n")
    err = _one_line_error(capsys, "agent", "--config", str(config))
    assert (
        err
        == f'kubenode agent: {config}: topologyManagerScope: unknown scope: "node" (known: container, pod)'
    )
    config.write_text("topologyManagerPolicyOptions: {max-allowable-numa-nodes: '4'}\n")
    err = _one_line_error(capsys, "agent", "--config", str(config))
    assert 'topologyManagerPolicyOptions: the minimum value of "max-allowable-numa-nodes"' in err


def test_more_than_8_numa_nodes_is_refused_as_the_kubelet_refuses(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(f"sysfsRoot: {nine_node_sysfs(tmp_path / 'sys')}\ntopologyManagerPolicy: best-effort\n")
    err = _one_line_error(capsys, "agent", "--config", str(config))
    assert err.endswith("topologyManagerPolicy: unsupported on machines with more than 8 NUMA Nodes"), err
    # max-allowable-numa-nodes lifts the limit, as in the kubelet; the none policy never had one.
    from agent.apis.config import load_config

    config.write_text(
        f"sysfsRoot: {tmp_path / 'sys'}\ntopologyManagerPolicy: best-effort\n"
        "topologyManagerPolicyOptions: {max-allowable-numa-nodes: '9'}\n"
    )
    assert load_config(config).topology_manager_policy == "best-effort"
    config.write_text(f"sysfsRoot: {tmp_path / 'sys'}\n")
    assert load_config(config).topology_manager_policy == "none"
