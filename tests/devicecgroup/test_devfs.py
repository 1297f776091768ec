"""A container's /dev (agent/kuberuntime/devfs.py), built for real in a forked child's own mount namespace
(unshare(CLONE_NEWNS), mounts made private): its listing is exactly the expected table, a device spec's
node is at its container path, and none of the host's other devices is there."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent.cm.devicecgroup.rules import container_rules
from agent.cm.devicecgroup.v1 import apply_v1
from agent.kuberuntime.devfs import DevfsError, DevPlan, dev_plan, node_for_device, node_from_cdi, setup_dev
from agent.kuberuntime.rootfs import private_mount_namespace
from kubenode.cdi.edits import DeviceNode as CdiDeviceNode


def describe(path: str) -> str:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return f"-> {os.readlink(path)}"
    if stat.S_ISDIR(st.st_mode):
        return f"dir {stat.S_IMODE(st.st_mode):04o}"
    kind = "c" if stat.S_ISCHR(st.st_mode) else "b" if stat.S_ISBLK(st.st_mode) else "file"
    numbers = f" {os.major(st.st_rdev)}:{os.minor(st.st_rdev)}" if kind != "file" else ""
    return f"{kind}{numbers} {stat.S_IMODE(st.st_mode):04o} {st.st_uid}:{st.st_gid}"


def listing(top: str = "/dev") -> dict[str, str]:
    found = {}
    for current, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(current, name)
            found[os.path.relpath(path, top)] = describe(path)
    return found


def dev_mounts() -> dict[str, list[str]]:
    """Mount point -> [fstype, mount options, super options] for /dev and below, from mountinfo."""
    mounts = {}
    with open("/proc/self/mountinfo") as table:
        for line in table:
            before, after = line.split(" - ")
            fields = before.split()
            if fields[4] == "/dev" or fields[4].startswith("/dev/"):
                fstype, _source, options = after.split()
                mounts[fields[4]] = [fstype, fields[5], options]
    return mounts


def in_namespace(plan: DevPlan, check: Callable[[], Any] = lambda: None, procs: Path | None = None) -> Any:
    """Fork; the child (in `procs`' cgroup if given) enters its own mount namespace, builds /dev from
    `plan`, and sends back its listing, its /dev mounts and what `check` returns (or the error)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(read_end)
            if procs is not None:
                procs.write_text(str(os.getpid()))
            private_mount_namespace()
            setup_dev(plan)
            report = {"listing": listing(), "mounts": dev_mounts(), "check": check()}
            code = 0
        except BaseException as exc:
            report = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            os.write(write_end, json.dumps(report).encode())
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        data = reader.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def expected_listing(*extra: tuple[str, str]) -> dict[str, str]:
    table = {
        "null": "c 1:3 0666 0:0", "zero": "c 1:5 0666 0:0", "full": "c 1:7 0666 0:0",
        "random": "c 1:8 0666 0:0", "urandom": "c 1:9 0666 0:0", "tty": "c 5:0 0666 0:0",
        "pts": "dir 0755", "pts/ptmx": "c 5:2 0666 0:0", "shm": "dir 1777", "mqueue": "dir 1777",
        "fd": "-> /proc/self/fd", "stdin": "-> /proc/self/fd/0", "stdout": "-> /proc/self/fd/1",
        "stderr": "-> /proc/self/fd/2", "ptmx": "-> pts/ptmx",
    }  # fmt: skip
    if os.path.exists("/proc/kcore"):
        table["core"] = "-> /proc/kcore"
    table.update(extra)
    return table


def _root() -> None:
    if os.geteuid() != 0:
        pytest.fail("the /dev tests need root (mount namespaces, mknod)")


def test_dev_is_exactly_the_default_table_plus_the_device(nodes: dict[str, Path]) -> None:
    _root()
    os.chown(nodes["loop"], 0, 44)
    plan = dev_plan(
        [node_for_device(str(nodes["loop"]), "/dev/vendor/gpu0"), node_for_device("/dev/null", "/dev/n2")]
    )
    report = in_namespace(plan, lambda: os.write(os.open("/dev/null", os.O_WRONLY), b"x"))
    assert "error" not in report, report
    assert report["listing"] == expected_listing(
        ("vendor", "dir 0755"), ("vendor/gpu0", "c 10:237 0600 0:44"), ("n2", "c 1:3 0666 0:0")
    )
    assert report["check"] == 1  # the container's /dev/null takes writes
    assert not {"fuse", "loop-control", "net", "kmsg"} & set(
        report["listing"]
    )  # the host's others are not there
    mounts = report["mounts"]
    assert mounts["/dev"][0] == "tmpfs" and "nosuid" in mounts["/dev"][1].split(",")
    assert {"mode=755", "size=65536k"} <= set(mounts["/dev"][2].split(","))
    assert mounts["/dev/pts"][0] == "devpts"
    assert {"mode=620", "ptmxmode=666", "gid=5"} <= set(mounts["/dev/pts"][2].split(","))
    assert {"nosuid", "noexec"} <= set(mounts["/dev/pts"][1].split(","))
    assert mounts["/dev/shm"][0] == "tmpfs" and {"nosuid", "nodev", "noexec"} <= set(
        mounts["/dev/shm"][1].split(",")
    )
    assert "size=65536k" in mounts["/dev/shm"][2].split(",")  # its mode, 1777, is in the listing
    assert mounts["/dev/mqueue"][0] == "mqueue"
    assert "fuse" in os.listdir("/dev")  # the host's /dev is untouched


def test_where_mknod_is_refused_the_host_node_is_bound(v1_cgroup: Path, nodes: dict[str, Path]) -> None:
    """In a device cgroup that grants the device rw but not m (and no mknod of everything), the node is a
    bind of the host's, and opens."""
    apply_v1(v1_cgroup, container_rules([(str(nodes["fuse"]), "rw")]))
    plan = dev_plan([node_for_device(str(nodes["fuse"]), "/dev/fuse")])
    report = in_namespace(plan, lambda: os.close(os.open("/dev/fuse", os.O_RDWR)), v1_cgroup / "cgroup.procs")
    assert "error" not in report, report
    assert report["listing"]["fuse"] == "c 10:229 0600 0:0"
    assert "/dev/fuse" in report["mounts"]  # a bind mount, not a node made in the tmpfs
    assert "/dev/null" not in report["mounts"]  # the defaults, granted m, were made with mknod


def test_shm_can_be_the_pods_directory(tmp_path: Path) -> None:
    _root()
    (tmp_path / "from-the-pod").write_text("shared")
    report = in_namespace(dev_plan([], shm_source=str(tmp_path)), lambda: os.listdir("/dev/shm"))
    assert report["check"] == ["from-the-pod"]


def test_privileged_sees_the_hosts_dev() -> None:
    _root()
    report = in_namespace(dev_plan([], privileged=True), lambda: sorted(os.listdir("/dev")))
    assert report["check"] == sorted(os.listdir("/dev"))
    assert report["mounts"]["/dev"][0] == dev_mounts()["/dev"][0]


def test_cdi_device_nodes_fill_what_they_omit_from_the_host() -> None:
    assert node_from_cdi(CdiDeviceNode("/dev/vnull", host_path="/dev/null")) == node_for_device(
        "/dev/null", "/dev/vnull"
    )
    made = node_from_cdi(CdiDeviceNode("/dev/gpu9", type="c", major=195, minor=9, file_mode=0o20660, gid=44))
    assert (made.type, made.major, made.minor, made.mode, made.gid, made.host_path) == (
        "c",
        195,
        9,
        0o660,
        44,
        "/dev/gpu9",
    )


UNDER_DEV = "must be a node under /dev"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: node_for_device("/dev/none-such", "/dev/x"),
            "device /dev/none-such: No such file or directory",
        ),
        (
            lambda: node_for_device("/etc/hostname", "/dev/x"),
            "device /etc/hostname: not a character or block",
        ),
        (
            lambda: node_for_device("/dev/null", "/opt/null"),
            f"device /dev/null: container path '/opt/null' {UNDER_DEV}",
        ),
        (lambda: node_for_device("/dev/null", "/dev/pts"), f"container path '/dev/pts' {UNDER_DEV}"),
        (lambda: node_for_device("/dev/null", "dev/null"), f"container path 'dev/null' {UNDER_DEV}"),
        (
            lambda: node_from_cdi(CdiDeviceNode("/dev/p", type="p")),
            "CDI device node /dev/p: fifo device nodes are",
        ),
        (
            lambda: node_from_cdi(CdiDeviceNode("/dev/x", type="b", host_path="/dev/null")),
            "type b but /dev/null is",
        ),
    ],
)
def test_bad_device_specs_are_one_line(call: Callable[[], object], message: str) -> None:
    with pytest.raises(DevfsError) as raised:
        call()
    assert message in str(raised.value) and "\n" not in str(raised.value)
