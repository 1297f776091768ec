"""The CRI log format (`<RFC3339Nano time> <stdout|stderr> <P|F> <content>`), as the kubelet reads it.

A CRI runtime writes each line of a container's output this way; `P` marks a partial line the runtime split
(the next entry continues it), `F` a full one. `content` turns one entry back into the bytes the container
wrote, with the entry's own time in front when `kubectl logs --timestamps` asks for it.
"""

from __future__ import annotations

import re

_ENTRY = re.compile(rb"^(\S+) (stdout|stderr) ([PF])(?: (.*))?$", re.DOTALL)


def content(line: bytes, timestamps: bool) -> bytes:
    """The output an entry holds (a newline after a full line); a line not in CRI format is kept as it is."""
    match = _ENTRY.match(line.rstrip(b"\n"))
    if match is None:
        return line
    when, _, tag, text = match.groups()
    out = (text or b"") + (b"\n" if tag == b"F" else b"")
    return when + b" " + out if timestamps else out
