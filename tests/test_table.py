"""kubenode.table: aligned columns under a header row."""

from __future__ import annotations

import pytest

from kubenode.table import table_lines


def test_columns_are_as_wide_as_their_widest_cell_without_trailing_spaces() -> None:
    assert table_lines(("NAME", "N"), [("a", "1"), ("longer", "")]) == [
        "NAME    N",
        "a       1",
        "longer",
    ]


def test_header_alone_when_there_are_no_rows() -> None:
    assert table_lines(("A", "BB"), []) == ["A  BB"]


def test_a_row_with_the_wrong_cell_count_is_an_error() -> None:
    with pytest.raises(ValueError, match="row 1 has 1 cells, the header 2"):
        table_lines(("A", "B"), [("x",)])
