"""The error every parser and validator raises: it names where the bad input is."""

from __future__ import annotations


class ValidationError(ValueError):
    """Bad input, located by source (a file, an API object) and a field path such as
    `spec.containers[0].resources.limits.cpu`."""

    def __init__(self, source: str, field: str, message: str) -> None:
        self.source = source
        self.field = field
        self.message = message
        where = ": ".join(part for part in (source, field) if part)
        super().__init__(f"{where}: {message}" if where else message)
