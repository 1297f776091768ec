"""Node Feature Discovery's local feature files, read: the labels a directory of them asks for.

NFD's `local` source format (what GPU Feature Discovery writes to features.d/gfd): one feature a line,
`name=value`, or `name` alone meaning `true`; `#` starts a comment; a `# +expiry-time=<RFC3339>` directive
makes the features after it (to the next directive) count only until then. A name without a `/` gets NFD's
`feature.node.kubernetes.io/` prefix. `read_features(directory, now)` reads every regular file in name
order (a later file's value wins, as NFD's union does) and returns the labels, the problems (one line
each, naming the file and line), and when the earliest still-live expiry falls, so the caller reads again
then. Names that are not label keys, values that are not label values and names in the restricted
namespaces (`kubernetes.io`, `k8s.io` and their subdomains) are dropped, each with a problem line, except
NFD's own `feature.node.kubernetes.io` and `profile.node.kubernetes.io` (and their subdomains), as
nfd-master allows; NodeRestriction lets a node write those, as subdomains of the kubelet's
node.kubernetes.io. Pure: nothing here talks to the API server.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from kubenode.model.resources import qualified_name_problem

DEFAULT_PREFIX = "feature.node.kubernetes.io/"
EXPIRY_DIRECTIVE = "+expiry-time="
RESTRICTED_DOMAINS = ("kubernetes.io", "k8s.io")
NFD_DOMAINS = ("feature.node.kubernetes.io", "profile.node.kubernetes.io")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
MAX_FILE_BYTES = 1 << 20  # a features file is a few hundred bytes; never read a runaway one whole


@dataclass
class Features:
    labels: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    next_expiry: float | None = None  # epoch seconds of the earliest expiry still ahead


def _within(prefix: str, domains: tuple[str, ...]) -> bool:
    return any(prefix == d or prefix.endswith("." + d) for d in domains)


def restricted(name: str) -> bool:
    """A name in kube's reserved namespaces that NFD does not allow either."""
    prefix = name.rpartition("/")[0]
    return _within(prefix, RESTRICTED_DOMAINS) and not _within(prefix, NFD_DOMAINS)


def _label_problem(name: str, value: str) -> str | None:
    problem = qualified_name_problem(name)
    if problem:
        return f"invalid label key {name!r}: {problem}"
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        return f"invalid label value {value!r} for {name}"
    if restricted(name):
        return f"{name}: kubernetes.io and k8s.io names are reserved (only NFD's feature. and profile.)"
    return None


def _expiry(text: str) -> float:
    """RFC 3339 as epoch seconds (ValueError otherwise)."""
    when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if when.tzinfo is None:
        raise ValueError("no time zone")
    return when.timestamp()


def parse_features(text: str, where: str, now: float, into: Features) -> None:
    """One file's features into `into`; `where` names the file in problems."""
    expires: float | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("#"):
            directive = line[1:].strip()
            if directive.startswith(EXPIRY_DIRECTIVE):
                try:
                    expires = _expiry(directive.removeprefix(EXPIRY_DIRECTIVE))
                except ValueError:
                    into.problems.append(f"{where}:{number}: expiry time {directive!r} is not RFC 3339")
                    expires = None
                if expires is not None and expires > now:
                    into.next_expiry = min(into.next_expiry or expires, expires)
            continue
        if not line or (expires is not None and expires <= now):
            continue
        name, equals, value = line.partition("=")
        name, value = name.strip(), value.strip() if equals else "true"
        if "/" not in name:
            name = DEFAULT_PREFIX + name
        problem = _label_problem(name, value)
        if problem:
            into.problems.append(f"{where}:{number}: {problem}; ignored")
            continue
        into.labels[name] = value


def read_features(directory: Path, now: float) -> Features:
    """Every regular file of `directory` (hidden ones and a missing directory skipped)."""
    features = Features()
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except FileNotFoundError:
        return features
    except OSError as exc:
        features.problems.append(f"{directory}: {exc.strerror}")
        return features
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_file(follow_symlinks=True):
            continue
        try:
            with open(entry.path, "rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            features.problems.append(f"{entry.path}: {exc.strerror}")
            continue
        if len(data) > MAX_FILE_BYTES:
            features.problems.append(f"{entry.path}: larger than {MAX_FILE_BYTES} bytes; ignored")
            continue
        parse_features(data.decode(errors="replace"), entry.path, now, features)
    return features
