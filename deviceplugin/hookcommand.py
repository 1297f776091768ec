"""The command a CDI spec names for the cpuset hook (deviceplugin.cdihook), from `cdiHookPath`.

The runtime runs the hook on the host, by path, with the args the spec gives; `cpuset --cpus LIST` is
appended to what `hook_command` returns. Flow, by what `cdiHookPath` is:

1. A directory: a hook bundle that `kubenode cdi-hook install DIR` wrote (deviceplugin.hookbundle, run by
   the DaemonSet's init container): its `hook.json` holds the path and args, which start a copied
   interpreter on the copied hook with nothing from the host.
2. Another path: a `kubenode` executable, run as `<path> cdi-hook cpuset --cpus LIST` (as before bundles).
3. Unset: the bundle at DEFAULT_BUNDLE_DIR when it is there (the DaemonSet mounts it into the plugin's
   container, read-only), else this interpreter on the hook's file, `python -I -S cdihook.py`: no site, no
   environment, no kubenode package, so it starts as fast as the bare interpreter (a wheel or `make install`).
   The file's cached bytecode is named, compiled at start when missing (a script given as source would be
   compiled on every run).
"""

from __future__ import annotations

import json
import os
import py_compile
import sys
from dataclasses import dataclass
from importlib.util import MAGIC_NUMBER, cache_from_source

from deviceplugin import cdihook

DEFAULT_BUNDLE_DIR = "/opt/kubenode/cdi-hook"
BUNDLE_FILE = "hook.json"


class HookCommandError(ValueError):
    """`cdiHookPath` names something the spec cannot run; the message names the path."""


@dataclass(frozen=True)
class HookCommand:
    path: str  # the executable the runtime starts (a host path)
    args: tuple[str, ...]  # its argv, without `cpuset --cpus LIST`

    def argv(self, cpu_list: str) -> list[str]:
        return [*self.args, "cpuset", "--cpus", cpu_list]


def hook_command(configured: str | None) -> HookCommand:
    if configured is None:
        if os.path.isfile(os.path.join(DEFAULT_BUNDLE_DIR, BUNDLE_FILE)):
            return from_bundle(DEFAULT_BUNDLE_DIR)
        return this_interpreter()
    if os.path.isdir(configured):
        return from_bundle(configured)
    return HookCommand(configured, ("kubenode", "cdi-hook"))


def this_interpreter() -> HookCommand:
    interpreter = os.path.realpath(sys.executable)  # a venv's python is a link; -I -S needs no venv
    return HookCommand(interpreter, (interpreter, "-I", "-S", hook_script()))


def hook_script() -> str:
    """cdihook.py's cached bytecode, compiled now if missing or stale; the source if it cannot be written.

    Compiled even under PYTHONDONTWRITEBYTECODE: a source script is compiled on every container start.
    """
    source = cdihook.__file__
    try:
        cached = cache_from_source(source)
    except NotImplementedError:  # sys.implementation.cache_tag is None
        return source
    if not _fresh(cached, source):
        try:
            py_compile.compile(source, cfile=cached, doraise=True)
        except (OSError, py_compile.PyCompileError):
            return source
    return cached


def _fresh(cached: str, source: str) -> bool:
    """The bytecode's header names this interpreter and the source's current mtime and size."""
    try:
        with open(cached, "rb") as pyc:
            header = pyc.read(16)
        stat = os.stat(source)
    except OSError:
        return False
    flags = int.from_bytes(header[4:8], "little")
    mtime, size = int.from_bytes(header[8:12], "little"), int.from_bytes(header[12:16], "little")
    return (
        header[:4] == MAGIC_NUMBER
        and flags == 0  # timestamp-checked bytecode (not hash-based)
        and mtime == int(stat.st_mtime) & 0xFFFFFFFF
        and size == stat.st_size & 0xFFFFFFFF
    )


def from_bundle(directory: str) -> HookCommand:
    path = os.path.join(directory, BUNDLE_FILE)
    try:
        with open(path) as source:
            data = json.load(source)
    except FileNotFoundError:
        raise HookCommandError(
            f"{directory} is not a hook bundle (no {BUNDLE_FILE}): `kubenode cdi-hook install {directory}`"
        ) from None
    except (OSError, ValueError) as exc:
        raise HookCommandError(f"{path}: unreadable: {exc}") from None
    executable = data.get("path") if isinstance(data, dict) else None
    args = data.get("args") if isinstance(data, dict) else None
    if not isinstance(executable, str) or not os.path.isabs(executable):
        raise HookCommandError(f"{path}: path {executable!r} is not an absolute path")
    if not isinstance(args, list) or not args or not all(isinstance(arg, str) for arg in args):
        raise HookCommandError(f"{path}: args {args!r} is not a list of strings")
    return HookCommand(executable, tuple(args))
