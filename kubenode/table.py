"""Plain-text tables for the CLI: a header row, then rows, columns left-aligned and two spaces apart."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

COLUMN_GAP = "  "


def table_lines(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """One line per row, header first; each column as wide as its widest cell, no trailing spaces."""
    table = [list(header), *(list(row) for row in rows)]
    for number, row in enumerate(table[1:], start=1):
        if len(row) != len(header):
            raise ValueError(f"table row {number} has {len(row)} cells, the header {len(header)}")
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return [
        COLUMN_GAP.join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table
    ]
