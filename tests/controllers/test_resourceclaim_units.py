"""The ResourceClaim controller's rules that need no server: kube's claim names and isPodDone."""

from __future__ import annotations

from controllers.resourceclaim import generate_name, owner_pod, pod_done


def test_claim_names_as_kube_makes_them() -> None:
    assert generate_name("web-0", "gpu") == "web-0-gpu-"
    pod, entry = "p" * 50, "c" * 20  # 72 characters with the hyphens: both cut in proportion
    name = generate_name(pod, entry)
    assert name == "p" * (50 * 57 // 72) + "-" + "c" * (20 * 57 // 72)
    assert len(name) + 5 <= 63  # the API server adds 5 random characters


def test_pod_done_as_kube_reads_it() -> None:
    assert pod_done({"status": {"phase": "Succeeded"}}) and pod_done({"status": {"phase": "Failed"}})
    assert not pod_done({"status": {"phase": "Running"}, "spec": {"nodeName": "n"}})
    deleted = {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert pod_done(deleted)  # deleted before it was scheduled: it never runs
    assert not pod_done({**deleted, "spec": {"nodeName": "n"}})  # still running until its node stops it


def test_owner_is_the_controller_pod_reference() -> None:
    refs = [
        {"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "1"},
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "2", "controller": True},
    ]
    assert owner_pod({"metadata": {"ownerReferences": refs}}) == ("p", "2")
    assert owner_pod({"metadata": {}}) == ("", "")
