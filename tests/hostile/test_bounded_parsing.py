"""Bounded parsing: quantities, priorities, annotations, YAML aliases, file sizes, names and UIDs, and errors
that never quote a file's contents (issue 14 items 3, 5, 6 and 11)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.manifests import write_manifest
from kubenode.model import ValidationError, parse_pod
from kubenode.model.documents import MAX_DOCUMENT_BYTES, decode_objects, load_objects
from kubenode.model.parse import is_valid_uid, parse_node
from kubenode.model.quantity import QuantityError, to_amount
from tests.agent.support import Harness, pod_manifest, wait_until
from tests.hostile.test_yaml_aliases import BOMB


def pod(resources: str = "{}", **spec: Any) -> dict[str, Any]:
    data = yaml.safe_load(pod_manifest("p", resources=resources))
    data["spec"].update(spec)
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize(
    ("resource", "value"),
    [
        ("cpu", "1e999999"),  # decimal.Overflow at agent start
        ("memory", "1e9999999"),  # pinned the CPU
        ("memory", "1e5000"),  # its rejection hit the int-to-str digit limit and passed admission
        ("cpu", 1e16),  # 1e19 millicores
        ("memory", "8Ei"),  # 2^63: one past int64
        ("memory", "1e99999999999"),  # an exponent past int32
        ("memory", "1" * 5000),
    ],
)
def test_quantities_beyond_int64_are_refused_at_once(resource: str, value: object) -> None:
    manifest = pod(f"{{limits: {{{resource}: {value!r}}}}}")
    tracemalloc.start()  # "at once": no big-number arithmetic, which allocates as it runs (and no clock)
    try:
        with pytest.raises(ValidationError) as caught:
            parse_pod(manifest, "p.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 384 * 1024, peak  # 10**999999 alone takes 415 KiB; today's worst case peaks at 220 KiB
    assert caught.value.field == f"spec.containers[0].resources.limits.{resource}"
    assert len(str(caught.value)) < 400  # the value is quoted cut, never in full


def test_a_simulated_node_with_absurd_capacity_is_refused() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n"},
        "status": {"capacity": {"pods": 1e30}},
    }
    with pytest.raises(ValidationError, match="too large"):
        parse_node(node, "cluster.yaml")


def test_tiny_cpu_rounds_up_to_one_millicore_as_resource_quantity_does() -> None:
    assert to_amount("cpu", "1e-999999999") == 1
    assert to_amount("memory", "1e-999999999") == 1
    assert to_amount("cpu", "0") == 0
    with pytest.raises(QuantityError):
        to_amount("cpu", "-1e-999999999")


def test_priority_is_int32() -> None:
    assert parse_pod(pod(priority=2**31 - 1)).priority == 2**31 - 1
    with pytest.raises(ValidationError) as caught:
        parse_pod(pod(priority=2**31), "p.yaml")
    assert caught.value.field == "spec.priority"


def test_annotations_are_capped_at_256_kib_in_total() -> None:
    data = pod()
    data["metadata"]["annotations"] = {f"k{i}": "v" * 1000 for i in range(300)}
    with pytest.raises(ValidationError, match="262144 bytes") as caught:
        parse_pod(data, "p.yaml")
    assert caught.value.field == "metadata.annotations"


def test_a_yaml_alias_bomb_is_refused_in_bounded_memory() -> None:
    """1.3 KB that would expand to 9^9 strings: refused by go-yaml's alias budget (kubenode/yamlload.py), with
    the line of the anchor and the counts, after a few thousand nodes; aliases within budget load
    (tests/hostile/test_yaml_aliases.py)."""
    text = f"apiVersion: v1\nkind: Pod\nstatus:\n  {BOMB.replace(chr(10), chr(10) + '  ')}"
    tracemalloc.start()
    try:
        with pytest.raises(
            ValidationError, match=r"line 4, column \d+: document contains excessive aliasing"
        ):
            decode_objects(text, "bomb.yaml")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 2**20, peak  # the expanded document would be gigabytes


def test_a_manifest_over_3_mib_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * MAX_DOCUMENT_BYTES + "\n")
    with pytest.raises(ValidationError, match="larger than 3145728 bytes"):
        load_objects(path)


def test_parse_errors_name_line_and_column_never_the_text() -> None:
    for text in (
        'kind: Pod\nsecret: "hunter2-token\n',
        'kind: Pod\nkey: "hunter2-token \\q"\n',
        '{"hunter2-token" 1}',
    ):
        with pytest.raises(ValidationError) as caught:
            decode_objects(text, "p.yaml")
        assert "hunter2" not in str(caught.value)
        assert "line " in str(caught.value)


@pytest.mark.parametrize("uid", ["abc\n", "abc\n\n", "a" * 129, "-abc", "a_b", "a/b"])
def test_uids_match_in_full(uid: str) -> None:
    assert not is_valid_uid(uid)
    data = pod()
    data["metadata"]["uid"] = uid
    with pytest.raises(ValidationError):
        parse_pod(data)


def test_a_253_character_pod_name_runs_and_logs(
    make_harness: Callable[..., Harness], manifests: Path
) -> None:
    name = ".".join(["a" * 63] * 4)[:253]
    assert len(name) == 253
    write_manifest(manifests, "long.yaml", pod_manifest(name, command="echo hello; sleep 600"))
    h = make_harness().start()
    item = h.wait_phase(name, "Running")
    log_path = Path(item["status"]["containerStatuses"][0]["logPath"])
    wait_until(lambda: log_path.exists() and log_path.read_text() == "hello\n", 5, "the container's log")
    assert all(len(part.encode()) <= 255 for part in log_path.parts)


def test_a_huge_quantity_neither_stops_the_agent_nor_its_watcher(
    make_harness: Callable[..., Harness], manifests: Path
) -> None:
    write_manifest(manifests, "huge.yaml", pod_manifest("huge", resources="{limits: {cpu: '1e999999'}}"))
    write_manifest(manifests, "web.yaml", pod_manifest("web"))
    h = make_harness().start()  # crashed with decimal.Overflow
    h.wait_phase("web", "Running")
    errors = h.agent.status_json()["errors"]
    assert [(e["field"], "too large" in e["message"]) for e in errors] == [
        ("spec.containers[0].resources.limits.cpu", True)
    ]
    # The same value dropped into the running agent killed the watcher; later changes were never acted on.
    write_manifest(
        manifests, "huge2.yaml", pod_manifest("huge2", resources="{limits: {memory: '1e9999999'}}")
    )
    write_manifest(manifests, "late.yaml", pod_manifest("late"))
    h.wait_phase("late", "Running")
    (manifests / "web.yaml").unlink()
    wait_until(lambda: h.pod("web") is None, 10, "the removal of web to be acted on")


def test_a_symlink_out_of_the_manifest_dir_is_never_read(
    make_harness: Callable[..., Harness], manifests: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$hunter2hash:19000:0:99999:7:::\n")
    (manifests / "evil.yaml").symlink_to(secret)
    (manifests / "loop.yaml").symlink_to(manifests / "loop.yaml")  # ELOOP on stat: skipped, nothing breaks
    (manifests / "inside.yaml").symlink_to(write_manifest(manifests, ".web.real", pod_manifest("web")))
    h = make_harness().start()
    h.wait_phase("web", "Running")  # a link inside the directory is fine
    document = h.agent.status_json()
    assert "hunter2" not in str(document)
    assert [(e["source"], e["message"]) for e in document["errors"]] == [
        (str(manifests / "evil.yaml"), "symlink leads outside the manifest directory; not read")
    ]
