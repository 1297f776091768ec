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


INT64_MAX = 2**63 - 1
MAX_ECHO = 64  # characters of a bad value quoted back in an error


def echo(value: object) -> str:
    """A bad value as an error quotes it: its repr, cut to MAX_ECHO characters (input may be huge)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT64_MAX:
        return f"an integer of {value.bit_length()} bits"  # repr of a huge int is slow or refused
    if isinstance(value, list | dict):
        return f"a {type(value).__name__} of {len(value)} items"  # repr would walk all of it
    text = repr(value)
    return text if len(text) <= MAX_ECHO else f"{text[:MAX_ECHO]}...({len(text)} characters)"
