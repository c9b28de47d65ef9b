"""A paper grid as report.html shows it: the run's own rows and columns first (report.md and the table's
own files keep every row and column). The methods whose every cell of ours is "not configured" fold into
one line at the table's foot, then likewise the value columns (the paper's backbones a preset's
stand-ins replace, :func:`contrastlab.tables.render.stand_in_cells`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contrastlab.blocks import Cell, Table, cell_text

__all__ = ["FoldedGrid", "fold"]

#: The label of a grid's published row; a method is folded only when every other row of it is empty.
PAPER_ROW = "paper"
#: The cells that carry nothing: the Δ row's dash, a number the paper does not give, an empty cell.
EMPTY = {"–", "n/a", ""}
#: What a grid's groups of rows are, by the header of their name column.
GROUP_NOUNS = {"method": "methods", "loss": "losses"}


@dataclass
class FoldedGrid:
    """What is left of a grid: its ``header`` and ``rows``, the rows that open a method (``starts``, by
    index) and one line per fold, (its text, the names it folds)."""

    header: list[str]
    rows: list[list]
    starts: set[int] = field(default_factory=set)
    lines: list[tuple[str, str]] = field(default_factory=list)


def _state(cell) -> str:
    """``nc`` (not configured), ``empty`` or ``value``."""
    if isinstance(cell, Cell) and cell.kind == "not-configured":
        return "nc"
    return "empty" if cell_text(cell) in EMPTY else "value"


def _unconfigured(states: list[str]) -> bool:
    return "nc" in states and "value" not in states


def _groups(table: Table) -> list[tuple[str, list[int], dict[int, str]]]:
    """A grid's rows by method: (its name, its rows' indices, {column: name}). A method starts at a row
    with a name cell (a label cell before the role's, not a parameter's); an empty name cell repeats the
    one above it (a backbone is named once for its methods), so a name reads "BERT-base InfoNCE"."""
    columns = [i for i in range(table.labels - 1) if table.header[i].lower() != "parameter"]
    groups: list[tuple[str, list[int], dict[int, str]]] = []
    carried = [""] * len(columns)
    for index, row in enumerate(table.rows):
        names = [cell_text(row[i]) for i in columns]
        first = next((i for i, name in enumerate(names) if name), None)
        if first is not None or not groups:
            carried = carried[: first or 0] + names[first or 0 :]
            groups.append((" ".join(filter(None, carried)), [], dict(zip(columns, carried, strict=True))))
        groups[-1][1].append(index)
    return groups


def _why(rows) -> str:
    """What a fold line says of its cells: "not evaluated" ones (their task is not in evaluation.tasks) fold
    with the "not configured" ones, and the line names both where there are any."""
    unscored = any(cell_text(cell) == "not evaluated" for row in rows for cell in row)
    return f"not configured{' or not evaluated' * unscored} by this preset"


def _listed(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 8 else ", ".join(names[:8]) + f" and {len(names) - 8} more"


def fold(table: Table) -> FoldedGrid:
    """``table`` (a paper grid, ``labels`` > 0) with its unconfigured methods and then value columns
    folded: a method when every value cell of its rows other than ``paper`` reads "not configured", a
    dash or "n/a", one at least "not configured"; then a column likewise, over the methods left."""
    labels, rows = table.labels, table.rows

    def values(indices: list[int], column: int | None = None) -> list[str]:
        own = [rows[i] for i in indices if cell_text(rows[i][labels - 1]) != PAPER_ROW]
        cols = range(labels, len(table.header)) if column is None else [column]
        return [_state(row[j]) for row in own for j in cols]

    groups = _groups(table)
    folded = [(name, members) for name, members, _ in groups if _unconfigured(values(members))]
    kept = [(members, carried) for _, members, carried in groups if not _unconfigured(values(members))]
    kept_rows = [i for members, _ in kept for i in members]
    gone = [j for j in range(labels, len(table.header)) if _unconfigured(values(kept_rows, j))]
    keep = [j for j in range(len(table.header)) if j not in gone]
    out = [[list(rows[i])[j] for j in keep] for i in kept_rows]
    grid = FoldedGrid([table.header[j] for j in keep], out)
    if folded:
        _name_kept_groups(grid, kept, kept_rows)
        names = [name for name, _ in folded]
        named = [h.lower() for h in table.header[: labels - 1] if h.lower() != "parameter"]
        noun = GROUP_NOUNS.get(named[-1] if named else "", "groups of rows")
        count = sum(len(members) for _, members in folded)
        of = f"{_listed(names)} ({len(names)} of {len(groups)} {noun}"
        text = f"{count} rows {_why(rows[i] for _, members in folded for i in members)}: {of}; "
        grid.lines.append((f"{text}the table's own files keep every row)", ", ".join(names)))
    if gone:
        columns = [table.header[j] for j in gone]
        noun = "column" if len(gone) == 1 else "columns"
        of = f"{_listed(columns)} ({len(gone)} of {len(table.header) - labels} columns"
        text = f"{len(gone)} {noun} {_why([rows[i][j] for j in gone] for i in kept_rows)}: {of}; "
        grid.lines.append((f"{text}the table's own files keep every column)", ", ".join(columns)))
    return grid


def _name_kept_groups(
    grid: FoldedGrid, kept: list[tuple[list[int], dict[int, str]]], order: list[int]
) -> None:
    """Each method left after folding opens with a rule, and names what the folded rows above it named
    (its backbone, when the row that named it was folded away)."""
    above: dict = {}
    for members, carried in kept:
        first = grid.rows[order.index(members[0])]
        grid.starts.add(order.index(members[0]))
        for column, name in carried.items():
            if not cell_text(first[column]) and name and carried.get(column) != above.get(column):
                first[column] = name
            if carried.get(column) != above.get(column):
                break  # the columns after the first that changed are named in the row already
        above = carried
