"""hostPath's `type` checks, as the kubelet's hostPath plugin makes them before a pod may use the path.

"" checks nothing; DirectoryOrCreate makes a missing directory (0755) and FileOrCreate a missing empty
file (0644; its parent must exist), as kube does: these are the only things the agent creates outside its
state directory, because the pod asked for them. The messages are the kubelet's.
"""

from __future__ import annotations

import os
import stat


class HostPathError(Exception):
    pass


def _fail(path: str, what: str) -> HostPathError:
    return HostPathError(f"hostPath type check failed: {path} is not {what}")


def check_host_path(path: str, path_type: str) -> None:
    if not path_type:
        return
    try:
        mode: int | None = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise HostPathError(f"hostPath type check failed: {path}: {exc.strerror}") from None
    if mode is None:
        if path_type == "DirectoryOrCreate":
            os.makedirs(path, mode=0o755, exist_ok=True)
            os.chmod(path, 0o755)
            return
        if path_type == "FileOrCreate":
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
            except OSError as exc:
                raise HostPathError(f"hostPath type check failed: {path}: {exc.strerror}") from None
            return
    checks = {
        "DirectoryOrCreate": (stat.S_ISDIR, "a directory"),
        "Directory": (stat.S_ISDIR, "a directory"),
        "FileOrCreate": (stat.S_ISREG, "a file"),
        "File": (stat.S_ISREG, "a file"),
        "Socket": (stat.S_ISSOCK, "a socket file"),
        "CharDevice": (stat.S_ISCHR, "a character device"),
        "BlockDevice": (stat.S_ISBLK, "a block device"),
    }
    test, what = checks[path_type]
    if mode is None or not test(mode):
        raise _fail(path, what)
