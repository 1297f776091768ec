"""Validating admission plugins that judge an object after validation, as kube-apiserver's do.

Each plugin is a `Validator`: given the user, the request and the old and new object it returns a
`Verdict` (None: nothing to say). The write path (handlers/writes.py) runs them after NodeRestriction:
the first denial answers the request, warnings become `Warning:` headers, and audit annotations are
written to the `apiserver.audit` log. Plugins: podsecurity/ (Pod Security admission).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from apiserver.request import RequestInfo
from apiserver.status import APIError


@dataclass
class Verdict:
    denied: APIError | None = None  # the answer when the request is refused
    warnings: list[str] = field(default_factory=list)  # kubectl prints them as `Warning: ...`
    audit: dict[str, str] = field(default_factory=dict)  # audit annotations (key -> value)


class Validator(Protocol):
    def validate(
        self, user: Any, info: RequestInfo, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
    ) -> Verdict | None: ...
