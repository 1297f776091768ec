"""The manifest directory source: static-pod UIDs, error reporting, and change detection within 1 s."""

from __future__ import annotations

import queue
from pathlib import Path

from agent.config.sources import CONFIG_HASH, ManifestSource, SourceSnapshot, static_pod_uid
from harness.manifests import write_manifest
from tests.agent.support import pod_manifest


def test_uids_are_deterministic_and_depend_on_content_node_and_file(manifests: Path) -> None:
    write_manifest(manifests, "a.yaml", pod_manifest("web"))
    first = ManifestSource(manifests, "node-a").scan().pods[0]
    again = ManifestSource(manifests, "node-a").scan().pods[0]
    other_node = ManifestSource(manifests, "node-b").scan().pods[0]
    assert first.uid == again.uid and len(first.uid) == 32
    assert other_node.uid != first.uid
    assert first.annotations[CONFIG_HASH] == first.uid
    assert (first.name, first.namespace, first.node_name) == ("web", "default", "node-a")
    obj = {"kind": "Pod"}
    assert static_pod_uid(obj, "n", "/x") != static_pod_uid(obj, "n", "/y")
    write_manifest(manifests, "a.yaml", pod_manifest("web", "sleep 1"))
    assert ManifestSource(manifests, "node-a").scan().pods[0].uid != first.uid


def test_explicit_uid_kept_and_problems_named(manifests: Path) -> None:
    write_manifest(
        manifests,
        "many.yaml",
        """\
        apiVersion: v1
        kind: Pod
        metadata: {name: fixed, uid: 1234-abcd}
        spec: {containers: [{name: c, command: [sleep, '1']}]}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: Bad_Name}
        spec: {containers: [{name: c, command: [sleep, '1']}]}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: typo}
        spec: {containers: [{name: c, comand: [sleep, '1']}]}
        ---
        apiVersion: v1
        kind: Service
        metadata: {name: svc}
        """,
    )
    write_manifest(manifests, "z-dup.yaml", pod_manifest("fixed"))
    write_manifest(manifests, ".hidden.yaml", "garbage: [")
    snapshot = ManifestSource(manifests, "n").scan()
    assert [(p.name, p.uid) for p in snapshot.pods] == [("fixed", "1234-abcd")]
    problems = {(Path(e.source.split(" ")[0]).name, e.field) for e in snapshot.errors}
    assert problems == {
        ("many.yaml", "metadata.name"),
        ("many.yaml", "spec.containers[0].comand"),
        ("many.yaml", "kind"),
        ("z-dup.yaml", "metadata.name"),
    }
    assert any("(document 2)" in e.source for e in snapshot.errors)
    assert any("duplicate pod default/fixed" in e.message for e in snapshot.errors)


def test_changes_are_noticed_without_waiting_for_the_rescan(manifests: Path) -> None:
    # The rescan is an hour away: every snapshot below comes from inotify, however loaded the machine is.
    snapshots: queue.Queue[SourceSnapshot] = queue.Queue()
    source = ManifestSource(manifests, "n", rescan_interval=3600)
    source.start(snapshots.put)
    try:
        assert snapshots.get(timeout=30).pods == ()

        def next_names(what: str) -> list[str]:
            try:
                snapshot = snapshots.get(timeout=60)
            except queue.Empty:
                raise AssertionError(f"no snapshot after the {what}") from None
            return sorted(p.name for p in snapshot.pods)

        write_manifest(manifests, "a.yaml", pod_manifest("a"))
        assert next_names("add") == ["a"]
        write_manifest(manifests, "a.yaml", pod_manifest("a", "sleep 5"))
        assert next_names("change") == ["a"]
        (manifests / "a.yaml").unlink()
        assert next_names("remove") == []
    finally:
        source.stop()
