"""The command a CDI spec names for the cpuset hook (deviceplugin.cdihook), from `cdiHookPath`.

The runtime runs the hook on the host, by path, with the args the spec gives; `cpuset --cpus LIST` is
appended to what `hook_command` returns. Flow, by what `cdiHookPath` is:

1. A directory: a hook bundle that `kubenode cdi-hook install DIR` wrote (deviceplugin.hookbundle, run by
   the DaemonSet's init container): its `hook.json` holds the path and args, which start a copied
   interpreter on the copied hook with nothing from the host.
2. Another path: a `kubenode` executable, run as `<path> cdi-hook cpuset --cpus LIST` (as before bundles).
3. Unset: the bundle at DEFAULT_BUNDLE_DIR when it is there (the DaemonSet mounts it into the plugin's
   container, read-only), else this interpreter with `-I -S -c BOOTSTRAP <package root>` (a wheel or
   `make install`): no site and no environment; the bootstrap puts the directory holding the deviceplugin
   and kubenode packages first on the path and runs the hook, which imports nothing else of kubenode, so
   it starts within a few imports of the bare interpreter.

`check_present` runs when the plugin starts: the executable and every absolute path among the args (a bundle's
loader and libraries, an interpreter, the package root with deviceplugin/cdihook.py) must be there, so a hook
left by a removed checkout or venv is one line at start rather than a failed container start later.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

from deviceplugin import cdihook

DEFAULT_BUNDLE_DIR = "/opt/kubenode/cdi-hook"
BUNDLE_FILE = "hook.json"
# `python -I -S -c BOOTSTRAP <root> cpuset --cpus LIST`: <root> goes first on the path, then the hook runs.
BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from deviceplugin.cdihook import main; sys.exit(main(sys.argv[1:]))"
)


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
    return HookCommand(interpreter, isolated_argv(interpreter, package_root()))


def isolated_argv(interpreter: str, root: str) -> tuple[str, ...]:
    """The hook under `interpreter -I -S`, importing deviceplugin and kubenode from `root` alone."""
    return (interpreter, "-I", "-S", "-c", BOOTSTRAP, root)


def package_root() -> str:
    """The directory holding the deviceplugin package: site-packages, or an editable install's checkout."""
    return os.path.dirname(os.path.dirname(os.path.abspath(cdihook.__file__)))


def check_present(hook: HookCommand) -> None:
    """Raise HookCommandError naming the first path of `hook` that is missing (or not executable)."""
    if not os.path.isfile(hook.path) or not os.access(hook.path, os.X_OK):
        problem = "is not executable" if os.path.isfile(hook.path) else "does not exist"
        raise HookCommandError(f"the hook's executable {hook.path} {problem}")
    for index, arg in enumerate(hook.args):
        if index and hook.args[index - 1] == BOOTSTRAP:  # the package root the bootstrap imports from
            module = os.path.join(arg, "deviceplugin", "cdihook.py")
            if not os.path.isfile(module):
                raise HookCommandError(f"the hook's module {module} does not exist")
        elif os.path.isabs(arg) and not os.path.exists(arg):
            raise HookCommandError(f"the hook's path {arg} (an argument of {hook.path}) does not exist")


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
