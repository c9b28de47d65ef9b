"""One Markdown-table writer for the report and the deviations lists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def markdown_table(rows: Sequence[Mapping[str, object]], *, numeric_after_first: bool = False) -> list[str]:
    """Lines of a pipe table whose header is the first row's keys, or ``["none"]`` without rows.

    Cells are made one line (whitespace collapsed) with ``|`` escaped, so free text cannot break the
    table; ``numeric_after_first`` right-aligns every column but the first.
    """
    if not rows:
        return ["none"]
    columns = list(rows[0])

    def cell(value: object) -> str:
        return " ".join(str(value).split()).replace("|", "\\|")

    rule = ["---" if i == 0 or not numeric_after_first else "---:" for i in range(len(columns))]
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join(rule) + "|"]
    return lines + ["| " + " | ".join(cell(row[c]) for c in columns) + " |" for row in rows]
