"""The CDI spec writer, the cpu backend with CDI on and off, and the config keys (no runtime needed)."""

from __future__ import annotations

import json
import logging
import re
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from deviceplugin.backend import BackendError
from deviceplugin.backends.cpu import CpuBackend
from deviceplugin.cdi import (
    CDI_VERSION,
    CpusetSpec,
    SpecError,
    device_name,
    qualified_name,
    remove_spec,
    spec_file_name,
)
from deviceplugin.config import ConfigError, CpuOptions, parse_config
from deviceplugin.discover import discover, render_table
from deviceplugin.hookcommand import HookCommand, HookCommandError, check_present, hook_command, isolated_argv
from kubenode.api.podresources.v1 import api_pb2 as api
from kubenode.api.podresources.v1 import api_pb2_grpc as api_grpc
from tests.devicemanager.conftest import FakeClock

# Stands for a kubenode executable (`<path> cdi-hook cpuset --cpus LIST`): nothing here runs the hook, but the
# backend refuses to start on a hook that is not there.
HOOK = "/usr/bin/true"
HOOK_COMMAND = hook_command(HOOK)
# The CDI spec's rules: kind vendor/class, device names alphanumeric at both ends with [_.-] between.
KIND_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*[A-Za-z0-9]$")
NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")


def read(path: Path) -> Any:
    return json.loads(path.read_text())


def test_names_follow_the_cdi_rules() -> None:
    assert device_name({2, 3}) == "2-3"
    assert device_name({0, 1, 4, 6, 7}) == "0-1_4_6-7"  # a comma is not allowed in a CDI name
    assert qualified_name({5}) == "kubenode.io/cpuset=5"
    assert spec_file_name("kubenode.io/cpu") == "kubenode-cpuset_kubenode.io_cpu.json"


def test_entries_are_written_atomically_with_env_and_hook(tmp_path: Path) -> None:
    spec = CpusetSpec(tmp_path, "ours.json", HOOK_COMMAND)
    assert spec.add(frozenset({0, 1, 4})) == "kubenode.io/cpuset=0-1_4"
    assert spec.add(frozenset({2})) == "kubenode.io/cpuset=2"
    data = read(tmp_path / "ours.json")
    assert data["cdiVersion"] == CDI_VERSION == "0.5.0"
    assert isinstance(data["kind"], str) and KIND_RE.match(data["kind"])
    assert data["devices"] == [
        {
            "name": "0-1_4",
            "containerEdits": {
                "env": ["KUBENODE_CPUSET=0-1,4"],
                "hooks": [
                    {
                        "hookName": "createRuntime",
                        "path": HOOK,
                        "args": ["kubenode", "cdi-hook", "cpuset", "--cpus", "0-1,4"],
                        "timeout": 10,
                    }
                ],
            },
        },
        {
            "name": "2",
            "containerEdits": {
                "env": ["KUBENODE_CPUSET=2"],
                "hooks": [
                    {
                        "hookName": "createRuntime",
                        "path": HOOK,
                        "args": ["kubenode", "cdi-hook", "cpuset", "--cpus", "2"],
                        "timeout": 10,
                    }
                ],
            },
        },
    ]
    assert all(NAME_RE.match(str(d["name"])) for d in data["devices"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ours.json"]  # no temporary file left
    (tmp_path / "ours.json").unlink()  # removed behind our back: the next Allocate of the set rewrites it
    spec.add(frozenset({2}))
    assert [d["name"] for d in read(tmp_path / "ours.json")["devices"]] == ["0-1_4", "2"]


def test_prune_keeps_in_use_and_recent_entries_then_removes_the_file(tmp_path: Path) -> None:
    clock = FakeClock()
    spec = CpusetSpec(tmp_path, "ours.json", HOOK_COMMAND, grace=30.0, clock=clock)
    spec.add(frozenset({0}))
    spec.add(frozenset({1}))
    assert spec.prune([]) == []  # both within the grace period
    clock.advance(30)
    assert spec.prune([frozenset({1})]) == ["0"]
    assert spec.names() == ["1"]
    clock.advance(30)
    assert spec.prune([]) == ["1"]
    assert not (tmp_path / "ours.json").exists()  # a spec without devices would be invalid


def test_a_restart_adopts_its_own_file_and_refuses_foreign_or_broken_ones(tmp_path: Path) -> None:
    CpusetSpec(tmp_path, "ours.json", HOOK_COMMAND).add(frozenset({3}))
    assert CpusetSpec(tmp_path, "ours.json", HOOK_COMMAND).names() == ["3"]
    (tmp_path / "theirs.json").write_text(json.dumps({"cdiVersion": "0.5.0", "kind": "example.com/x"}))
    with pytest.raises(SpecError, match=r"theirs.json: kind 'example.com/x' is not kubenode.io/cpuset"):
        CpusetSpec(tmp_path, "theirs.json", HOOK_COMMAND)
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(SpecError, match=r"broken.json: unreadable, refusing to overwrite it"):
        CpusetSpec(tmp_path, "broken.json", HOOK_COMMAND)
    assert (tmp_path / "broken.json").read_text() == "{"


def gone_hook(tmp_path: Path) -> HookCommand:
    """The hook of an earlier install whose venv or checkout was removed since."""
    root = tmp_path / "removed-checkout"
    return HookCommand(str(root / "python3.11"), isolated_argv(str(root / "python3.11"), str(root)))


def test_a_start_rewrites_entries_of_another_hook_and_building_only_reads(tmp_path: Path) -> None:
    old = CpusetSpec(tmp_path, "ours.json", gone_hook(tmp_path))
    old.add(frozenset({0}))
    old.add(frozenset({1, 2}))
    before = (tmp_path / "ours.json").read_bytes()
    spec = CpusetSpec(tmp_path, "ours.json", HOOK_COMMAND)  # discover builds it too: nothing written yet
    assert (tmp_path / "ours.json").read_bytes() == before
    assert spec.names() == ["0", "1-2"]
    assert spec.refresh() == [str(tmp_path / "removed-checkout" / "python3.11")]
    devices = read(tmp_path / "ours.json")["devices"]
    assert [(d["name"], d["containerEdits"]["hooks"][0]["path"]) for d in devices] == [
        ("0", HOOK),
        ("1-2", HOOK),
    ]
    assert devices[1]["containerEdits"]["hooks"][0]["args"] == [
        "kubenode",
        "cdi-hook",
        "cpuset",
        "--cpus",
        "1-2",
    ]
    assert spec.refresh() == []  # current now: nothing to rewrite
    written = (tmp_path / "ours.json").stat()
    assert CpusetSpec(tmp_path, "ours.json", HOOK_COMMAND).refresh() == []  # a restart of the same install
    assert (tmp_path / "ours.json").stat().st_mtime_ns == written.st_mtime_ns


def test_an_allocate_rewrites_the_file_when_someone_else_wrote_it(tmp_path: Path) -> None:
    spec = CpusetSpec(tmp_path, "ours.json", HOOK_COMMAND)
    spec.add(frozenset({0}))
    CpusetSpec(tmp_path, "ours.json", gone_hook(tmp_path)).add(frozenset({1}))  # another install, meanwhile
    assert spec.add(frozenset({0})) == "kubenode.io/cpuset=0"
    devices = read(tmp_path / "ours.json")["devices"]
    assert [(d["name"], d["containerEdits"]["hooks"][0]["path"]) for d in devices] == [("0", HOOK)]
    written = (tmp_path / "ours.json").stat().st_mtime_ns
    spec.add(frozenset({0}))  # unchanged on disk and known: not written again
    assert (tmp_path / "ours.json").stat().st_mtime_ns == written


def test_a_missing_hook_is_one_line_at_start(tmp_path: Path) -> None:
    gone = gone_hook(tmp_path)
    with pytest.raises(HookCommandError, match=f"^the hook's executable {gone.path} does not exist$"):
        check_present(gone)
    with pytest.raises(
        HookCommandError, match=f"^the hook's module {tmp_path}/deviceplugin/cdihook.py does not exist$"
    ):
        check_present(HookCommand(HOOK, isolated_argv(HOOK, str(tmp_path))))
    (tmp_path / "kubenode").write_text("#!/bin/sh\n")
    with pytest.raises(HookCommandError, match=f"executable {tmp_path}/kubenode is not executable$"):
        check_present(hook_command(str(tmp_path / "kubenode")))
    check_present(hook_command(None))  # this interpreter on this checkout
    options = CpuOptions(
        cdi=True, cdi_spec_dir=str(tmp_path / "cdi"), cdi_hook_path=str(tmp_path / "no" / "kubenode")
    )
    with pytest.raises(
        BackendError, match=r"^kubenode.io/cpu: CDI hook: the hook's executable .*/no/kubenode does"
    ):
        CpuBackend(options)
    assert not (tmp_path / "cdi").exists()


def test_backend_with_cdi_on_writes_before_answering(tmp_path: Path) -> None:
    options = CpuOptions(cdi=True, cdi_spec_dir=str(tmp_path / "cdi"), cdi_hook_path=HOOK)
    backend = CpuBackend(options)
    allocation = backend.allocate(["cpu0"])
    assert allocation.cdi_devices == ["kubenode.io/cpuset=0"]
    assert allocation.envs == {"KUBENODE_CPUSET": "0"}
    assert [d["name"] for d in read(tmp_path / "cdi" / spec_file_name("kubenode.io/cpu"))["devices"]] == ["0"]
    assert backend.prune_cdi() is None  # no PodResources socket: nothing is pruned
    backend.stop()


def test_backend_without_cdi_answers_the_env_and_says_once_that_pinning_needs_cdi(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = CpuBackend(
        CpuOptions(cdi_spec_dir=str(tmp_path / "absent"))
    )  # unset: on only if the dir exists
    with caplog.at_level(logging.INFO, logger="deviceplugin.backends.cpu"):
        first = backend.allocate(["cpu0"])
        backend.allocate(["cpu0"])
    assert first.cdi_devices == [] and first.envs == {"KUBENODE_CPUSET": "0"}
    told = [r.getMessage() for r in caplog.records if "pinning needs CDI" in r.getMessage()]
    assert len(told) == 1 and f"no CDI spec dir {tmp_path / 'absent'}" in told[0]
    (tmp_path / "present").mkdir()
    on = CpuBackend(CpuOptions(cdi_spec_dir=str(tmp_path / "present"), cdi_hook_path=HOOK))
    assert on.allocate(["cpu0"]).cdi_devices == ["kubenode.io/cpuset=0"]


def test_backend_refuses_to_start_on_a_foreign_file_of_its_name(tmp_path: Path) -> None:
    (tmp_path / spec_file_name("kubenode.io/cpu")).write_text("not json")
    with pytest.raises(BackendError, match=r"kubenode.io/cpu: CDI spec: .* refusing to overwrite it"):
        CpuBackend(CpuOptions(cdi=True, cdi_spec_dir=str(tmp_path), cdi_hook_path=HOOK))


def test_config_keys_and_discover(tmp_path: Path) -> None:
    config = parse_config(
        {
            "resources": [
                {
                    "name": "kubenode.io/cpu",
                    "backend": "cpu",
                    "cpu": {
                        "cdi": True,
                        "cdiSpecDir": str(tmp_path),
                        "cdiHookPath": HOOK,
                        "podResourcesSocket": "/run/pr.sock",
                        "cdiPruneSeconds": 5,
                    },
                }
            ]
        }
    )
    cpu = config.resources[0].cpu
    assert (cpu.cdi, cpu.cdi_spec_dir, cpu.cdi_hook_path) == (True, str(tmp_path), HOOK)
    assert (cpu.pod_resources_socket, cpu.cdi_prune_seconds) == ("/run/pr.sock", 5.0)
    assert (
        parse_config({"resources": [{"name": "kubenode.io/cpu", "backend": "cpu"}]}).resources[0].cpu.cdi
        is None
    )
    with pytest.raises(
        ConfigError, match=r"resources\[0\].cpu.cdiHookPath: 'kubenode' must be an absolute path"
    ):
        parse_config({"resources": [{"name": "a.b/c", "backend": "cpu", "cpu": {"cdiHookPath": "kubenode"}}]})
    with pytest.raises(ConfigError, match=r"resources\[0\].cpu.cdi: 'yes' must be true or false"):
        parse_config({"resources": [{"name": "a.b/c", "backend": "cpu", "cpu": {"cdi": "yes"}}]})
    (entry,) = discover(config, str(tmp_path))
    assert entry["cdi"] == {"enabled": True, "specDir": str(tmp_path), "specDirExists": True}
    assert (
        render_table([entry]).splitlines()[-1]
        == f"kubenode.io/cpu: CDI pinning on (spec dir {tmp_path} exists)"
    )
    assert list(tmp_path.iterdir()) == []  # discover writes nothing


def test_allocate_fails_naming_the_file_when_the_entry_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "cdi"
    backend = CpuBackend(CpuOptions(cdi=True, cdi_spec_dir=str(blocker), cdi_hook_path=HOOK))
    blocker.write_text("a file where the spec dir should be")  # root ignores modes: break the path instead
    with pytest.raises(BackendError, match=f"kubenode.io/cpu: cannot write {blocker}/kubenode-cpuset_"):
        backend.allocate(["cpu0"])


def test_remove_spec_removes_only_our_file(tmp_path: Path) -> None:
    assert remove_spec(tmp_path, "kubenode.io/cpu") is None
    spec = CpusetSpec(tmp_path, spec_file_name("kubenode.io/cpu"), HOOK_COMMAND)
    spec.add(frozenset({0}))
    assert remove_spec(tmp_path, "kubenode.io/cpu") == spec.path and not spec.path.exists()
    spec.path.write_text(json.dumps({"cdiVersion": "0.5.0", "kind": "example.com/x"}))
    with pytest.raises(SpecError, match=r"kubenode-cpuset_kubenode.io_cpu.json: kind 'example.com/x' is not"):
        remove_spec(tmp_path, "kubenode.io/cpu")
    assert spec.path.exists()


class _PodResources(api_grpc.PodResourcesListerServicer):
    """A kubelet's PodResources List: the pods in `pods` (name -> device IDs of kubenode.io/cpu)."""

    def __init__(self) -> None:
        self.pods: dict[str, list[str]] = {}

    def List(self, request: Any, context: Any) -> Any:
        def pod(name: str, ids: list[str]) -> Any:
            devices = [api.ContainerDevices(resource_name="kubenode.io/cpu", device_ids=ids)]
            containers = [api.ContainerResources(name="main", devices=devices)]
            return api.PodResources(name=name, namespace="default", containers=containers)

        return api.ListPodResourcesResponse(pod_resources=[pod(n, ids) for n, ids in self.pods.items()])


def _serve_pod_resources(path: Path, servicer: _PodResources) -> grpc.Server:
    path.unlink(missing_ok=True)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    api_grpc.add_PodResourcesListerServicer_to_server(servicer, server)
    server.add_insecure_port(f"unix://{path}")
    server.start()
    return server


def test_a_restarted_kubelet_listing_no_pod_yet_prunes_nothing(tmp_path: Path) -> None:
    """kubelet 1.37, just restarted, answers PodResources List with no pod for about a second (until its pod
    manager has the pods from the API server; for as long as that is unreachable): the entry of a running
    pod must stay, or a restart of its container finds no CDI device (found under the real kubelet,
    interop/tests). An empty answer from the kubelet that listed pods before does prune: its pods are gone."""
    socket = tmp_path / "kubelet.sock"
    kubelet = _PodResources()
    server = _serve_pod_resources(socket, kubelet)
    options = CpuOptions(
        cdi=True,
        cdi_spec_dir=str(tmp_path / "cdi"),
        cdi_hook_path=HOOK,
        pod_resources_socket=str(socket),
        cdi_prune_seconds=0.001,
    )
    backend = CpuBackend(options)
    spec = tmp_path / "cdi" / spec_file_name("kubenode.io/cpu")
    try:
        backend.allocate(["cpu0"])
        backend.allocate(["cpu1"])
        kubelet.pods = {"running": ["cpu0"]}
        assert backend.prune_cdi() == ["1"]  # freed: pruned
        server.stop(None)
        restarted = _PodResources()  # the new kubelet: no pod listed yet
        server = _serve_pod_resources(socket, restarted)
        assert backend.prune_cdi() is None
        assert [d["name"] for d in read(spec)["devices"]] == ["0"]
        restarted.pods = {"running": ["cpu0"]}  # synced
        assert backend.prune_cdi() == []
        restarted.pods = {}  # the pod deleted: the same kubelet lists none now
        assert backend.prune_cdi() == ["0"]
        assert not spec.exists()
    finally:
        server.stop(None)
        backend.stop()
