"""The report as one document, rendered twice: :mod:`.sections` and :mod:`.answer` build a list of blocks,
:func:`to_markdown` writes ``report.md`` from it and :mod:`.html` writes ``report.html`` from the same
list. Nothing reads a rendered page back: what the HTML shows apart (a heading's id, a verdict's kind, a
tally's counts, a grid's label columns and "not configured" cells, a figure's place in its paper, the
in-page target of a link) is a field of a block.

The blocks: :class:`Heading` (a section: level, words, id, contents label), :class:`Paragraph`,
:class:`Bullets`, :class:`Table` (its cells plain text, a :class:`Cell` of a kind, a :class:`Verdict` or
a list of text and :class:`Link`), :class:`Tally`, :class:`Figure`, :class:`Code` and :class:`Fold`.
The Markdown of other modules (the cost, the searches, the comparison tables) enters as
:func:`blocks_of` their lines: headings, tables, lists and paragraphs, as written.

Example::

    >>> print(to_markdown([Heading(2, "Cost"), rows_table([{"rule": "train", "h": "1.0"}], right=1)]))
    ## Cost
    <BLANKLINE>
    | rule | h |
    |---|---:|
    | train | 1.0 |
    <BLANKLINE>
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from markdown.extensions.toc import slugify

from contrastlab.tables.markup import escape_markdown

__all__ = [
    "Bullets",
    "Cell",
    "Code",
    "Figure",
    "Fold",
    "Heading",
    "Link",
    "Paragraph",
    "Table",
    "Tally",
    "Verdict",
    "assign_ids",
    "blocks_of",
    "cell_text",
    "figure_id",
    "kind_of",
    "rows_table",
    "short_label",
    "to_markdown",
    "walk",
]


@dataclass
class Heading:
    """A section's heading: ``id`` "" takes its section's id and its words (:func:`assign_ids`);
    ``label`` "" lists it in the contents by its words (a long heading up to its colon)."""

    level: int
    text: str
    id: str = ""
    label: str = ""


@dataclass
class Paragraph:
    text: str  # Markdown inline text (bold, code, links)


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Link:
    """A link to ``href`` (relative to the report; "" names its target without a link); ``anchor``: the
    id of the target's place on the page (a table's or figure's), where the HTML page links instead."""

    text: str
    href: str = ""
    anchor: str = ""


@dataclass
class Cell:
    """A table cell of a kind: ``not-configured`` (outside the config's grid), a seed-noise verdict's
    badge kind (``within``, ``above``, ``below``, ``undecided``) with the ``marker`` its text carries (the
    marker in the badge), or any other badge kind without a marker (the whole text in the badge: a count
    of claims of a verdict)."""

    text: str
    kind: str = ""
    marker: str = ""


@dataclass
class Verdict:
    """A verdict: its ``word`` (badge ``kind``), ``head`` kept on its line (the share of parts run) and
    ``tail``, the reasoning (folded under the badge in the HTML); the Markdown is the three in a row."""

    kind: str
    word: str
    head: str = ""
    tail: str = ""


#: What a table cell holds: its Markdown, a :class:`Cell` of a kind, a :class:`Verdict`, or a list of text
#: and :class:`Link` pieces.
Content = str | Cell | Verdict | list


@dataclass
class Table:
    """A table: ``header``, ``rows`` of cells (:data:`Content`), the columns from ``right`` on
    right-aligned (None: none); ``labels``: a paper grid's label columns (the last the row's role, "paper"
    on the published rows), 0 for any other table."""

    header: list[str]
    rows: list[list]
    right: int | None = None
    labels: int = 0


@dataclass
class Tally:
    """Claims counted by verdict: ``lead`` (Markdown), the ``counts`` (verdict -> n, zeros included),
    ``of`` the claims counted, then ``tail``."""

    lead: str
    counts: dict[str, int]
    of: int
    tail: str = ""


@dataclass
class Figure:
    """A figure: its catalogue ``name``, its ``place`` in its paper ("Nie Fig. 2a"; "" for none), its
    PNG (``image``, relative to the report), ``caption`` and the ``files`` beside it (text and links)."""

    name: str
    place: str
    image: str
    caption: str
    files: list = field(default_factory=list)

    @property
    def id(self) -> str:
        return figure_id(self.name)


@dataclass
class Code:
    """A code block; ``box``: the class of the box around it (an indented block in a ``<div>``), else a
    fenced block of ``language``."""

    lines: list[str]
    language: str = ""
    box: str = ""


@dataclass
class Fold:
    """Blocks folded under a ``summary`` (``<details>``)."""

    summary: str
    blocks: list = field(default_factory=list)


def kind_of(verdict: str) -> str:
    """A claim verdict's badge kind: ``not reproduced`` -> ``not-reproduced``."""
    return verdict.replace(" ", "-")


def rows_table(rows: Sequence[Mapping[str, object]], right: int | None = None) -> Table:
    """A table whose header is the first row's keys (no rows: the Markdown reads "none"); the columns from
    ``right`` on right-aligned."""
    header = list(rows[0]) if rows else []
    return Table(header, [[row[c] for c in header] for row in rows], right)


def figure_id(name: str) -> str:
    """A figure's id from its name: ``nie2023/nie2023_fig2a`` -> ``nie2023-fig2a``,
    ``oar_cifar10/lr_sweep`` -> ``oar-cifar10-lr-sweep``."""
    experiment, figure = name.split("/")
    figure = figure.removeprefix(f"{experiment}_")
    return f"{experiment}-{figure}".replace("_", "-")


# --- Markdown --------------------------------------------------------------------------------------


def cell_text(content: Content) -> str:
    """A cell's (or a paragraph's pieces') Markdown."""
    if isinstance(content, str):
        return content
    if isinstance(content, Cell):
        return content.text
    if isinstance(content, Verdict):
        return content.word + content.head + content.tail
    if isinstance(content, Link):
        return f"[{content.text}]({content.href})" if content.href else content.text
    return "".join(cell_text(piece) for piece in content)


def tally_text(tally: Tally) -> str:
    counts = " · ".join(f"{word} {n}" for word, n in tally.counts.items())
    return f"{tally.lead}{counts} (of {tally.of} claims).{tally.tail}"


def _table_lines(table: Table, literals: Iterable[str] = ()) -> list[str]:
    if not table.rows:
        return ["none"]

    def cell(content: Content) -> str:  # one line, "|" escaped: free text cannot break the table
        return escape_markdown(" ".join(cell_text(content).split()), literals).replace("|", "\\|")

    right = len(table.header) if table.right is None else table.right
    rule = ["---:" if i >= right else "---" for i in range(len(table.header))]
    lines = ["| " + " | ".join(cell(h) for h in table.header) + " |", "|" + "|".join(rule) + "|"]
    return lines + ["| " + " | ".join(cell(c) for c in row) + " |" for row in table.rows]


def _block_lines(block, literals: Iterable[str] = ()) -> list[str]:
    def text(markdown: str) -> str:
        return escape_markdown(markdown, literals)

    if isinstance(block, Heading):
        return ["#" * block.level + " " + text(block.text)]
    if isinstance(block, Paragraph):
        return [text(block.text)]
    if isinstance(block, Bullets):
        return [f"- {text(item)}" for item in block.items]
    if isinstance(block, Table):
        return _table_lines(block, literals)
    if isinstance(block, Tally):
        return [text(tally_text(block))]
    if isinstance(block, Figure):
        files = text(cell_text(block.files))
        return [
            f"#### {block.name}",
            "",
            f"![{block.name}]({block.image})",
            "",
            f"{text(block.caption)} ({files})",
        ]
    if isinstance(block, Code) and block.box:
        return [
            f'<div class="{block.box}" markdown="1">',
            "",
            *(f"    {line}" for line in block.lines),
            "",
            "</div>",
        ]
    if isinstance(block, Code):
        return [f"```{block.language}", *block.lines, "```"]
    if isinstance(block, Fold):
        inner = [line for child in block.blocks for line in [*_block_lines(child, literals), ""]]
        summary = block.summary  # raw HTML's text: a name in it entity-escaped
        for name in sorted((n for n in literals if n in summary), key=len, reverse=True):
            summary = summary.replace(name, html.escape(name))
        return [f'<details markdown="1"><summary>{summary}</summary>', "", *inner, "</details>"]
    raise TypeError(f"not a block of the report: {block!r}")


def to_markdown(blocks: list, literals: Iterable[str] = ()) -> str:
    """``report.md``: each block's Markdown, a blank line after each; each of ``literals`` (names from the
    config, file names: :func:`literals_of`) escaped wherever a sentence holds it, so that it reads as
    written (code blocks show everything as written already)."""
    literals = frozenset(literals)
    return "\n".join(line for block in blocks for line in [*_block_lines(block, literals), ""])


def blocks_of(lines: list[str]) -> list:
    """The blocks of Markdown ``lines`` another module wrote (runs of lines between blank lines): a
    heading, a table (its first column left-aligned, the rest right-aligned where its rule says so), a
    list, or a paragraph."""
    blocks, run = [], []
    for line in [*(line for text in lines for line in text.split("\n")), ""]:  # an item may hold lines
        if line:
            run.append(line)
            continue
        if run and run[0].startswith("#"):
            level = len(run[0]) - len(run[0].lstrip("#"))
            blocks.append(Heading(level, run[0][level + 1 :]))
        elif len(run) > 1 and all(row.startswith("|") for row in run) and set(run[1]) <= set("|-: "):
            rule = run[1].strip("|").split("|")
            right = next((i for i, r in enumerate(rule) if r.endswith(":")), None)
            rows = [[c.replace("\\|", "|") for c in row[2:-2].split(" | ")] for row in run[2:]]
            blocks.append(Table(run[0][2:-2].split(" | "), rows, right))
        elif run and all(row.startswith("- ") for row in run):
            blocks.append(Bullets([row[2:] for row in run]))
        elif run:
            blocks.append(Paragraph("\n".join(run)))
        run = []
    return blocks


# --- ids -------------------------------------------------------------------------------------------


def short_label(text: str) -> str:
    """A long heading's contents label: its words up to a colon ("Search of nie2023")."""
    return text.split(":", 1)[0] if len(text) > 40 and ":" in text else text


def assign_ids(blocks: list) -> dict[int, str]:
    """``id(heading) -> its id`` for every :class:`Heading` and :class:`Figure` of ``blocks`` (folds
    included), in document order: its own ``id`` where it has one, else the slug of its label, after the
    id of the heading above it for a heading below level 2 (``nie2023-claims``); a repeat gets ``-2``,
    ``-3``."""
    ids: dict[int, str] = {}
    used: set[str] = set()
    parents: dict[int, str] = {}  # level -> id of the last heading at that level
    for block in walk(blocks):
        if isinstance(block, Figure):
            level, anchor = 4, block.id
        elif isinstance(block, Heading):
            level, anchor = block.level, block.id
            if not anchor:
                above = next((parents[k] for k in range(level - 1, 1, -1) if k in parents), None)
                anchor = slugify(block.label or short_label(block.text), "-") or "section"
                anchor = f"{above}-{anchor}" if above and level > 2 else anchor
        else:
            continue
        candidate, n = anchor, 1
        while candidate in used:
            n += 1
            candidate = f"{anchor}-{n}"
        used.add(candidate)
        ids[id(block)] = candidate
        parents = {k: v for k, v in parents.items() if k < level}
        parents[level] = candidate
    return ids


def walk(blocks: list) -> Iterator:
    """Every block of ``blocks``, a fold's own blocks after it."""
    for block in blocks:
        yield block
        if isinstance(block, Fold):
            yield from walk(block.blocks)
