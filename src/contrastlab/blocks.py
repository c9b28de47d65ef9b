"""A page as a list of blocks, and its Markdown: every page the pipeline writes (``report.md`` and
report.html, each table's ``.md``, ``plan.md``, gpu-check's ``report.md``, ``docs/deviations.md``) is
built as blocks and rendered by :func:`to_markdown`; report.html renders the same blocks
(:mod:`contrastlab.report.html`). Nothing reads a rendered page back: what the HTML shows apart is a
field of a block. Names from a config, a file name or a metrics file are text, not Markdown:
:func:`literals_of` finds them and the renderer escapes them (:func:`escape_markdown`).

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
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

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
    "cell_text",
    "escape_markdown",
    "figure_id",
    "kind_of",
    "literals_of",
    "markdown_lines",
    "rows_table",
    "to_markdown",
]


@dataclass
class Heading:
    """A section's heading: ``id`` "" takes its section's id and its words
    (:func:`contrastlab.report.document.assign_ids`); ``label`` "" lists it in the contents by its words
    (a long heading up to its colon)."""

    level: int
    text: str
    id: str = ""
    label: str = ""


@dataclass
class Paragraph:
    text: str  # Markdown inline text (bold, code, links); a line break stays one


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Link:
    """A link to ``href`` (relative to the page; "" names its target without a link); ``anchor``: the
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


#: What a table cell holds: its Markdown, a :class:`Cell` of a kind, a :class:`Verdict`, a list of text
#: and :class:`Link` pieces, or any other value (its ``str``).
Content = str | Cell | Verdict | list | object


@dataclass
class Table:
    """A table: ``header``, ``rows`` of cells (:data:`Content`), the columns from ``right`` to ``left`` (None:
    none; the last) right-aligned; ``labels``: a paper grid's label columns (the last the row's role, "paper"
    on the published rows), 0 for any other table. No rows: the Markdown reads "none"."""

    header: list[str]
    rows: list[list]
    right: int | None = None
    labels: int = 0
    left: int | None = None

    def right_aligned(self, column: int) -> bool:
        """Whether ``column`` is one of those from ``right`` to ``left`` (both renderers ask it)."""
        return self.right is not None and self.right <= column and (self.left is None or column < self.left)


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
    PNG (``image``, relative to the page), ``caption`` and the ``files`` beside it (text and links)."""

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


def rows_table(
    rows: Sequence[Mapping[str, object]], right: int | None = None, left: int | None = None
) -> Table:
    """A table whose header is the first row's keys (no rows: the Markdown reads "none"); the columns from
    ``right`` to ``left`` (None: the last) right-aligned."""
    header = list(rows[0]) if rows else []
    return Table(header, [[row[c] for c in header] for row in rows], right, left=left)


def figure_id(name: str) -> str:
    """A figure's id from its name: ``nie2023/nie2023_fig2a`` -> ``nie2023-fig2a``,
    ``oar_cifar10/lr_sweep`` -> ``oar-cifar10-lr-sweep``."""
    experiment, figure = name.split("/")
    figure = figure.removeprefix(f"{experiment}_")
    return f"{experiment}-{figure}".replace("_", "-")


# --- names as text ---------------------------------------------------------------------------------

#: A name holding any of these can read as Markdown or HTML: a link, code, emphasis, an escape, an
#: entity (an ampersand only where one begins: "Smith & Lee" reads as written), a tag or a table's column
#: break (an underscore only at a word's edge: inside a word it is literal to every Markdown reader).
_MARKUP = re.compile(r"[\\`*\[\]<>|!]|&#?\w+;|(?:^|\W)_|_(?:\W|$)")
#: CommonMark's backslash escapes for the characters above ("|" is escaped by the table's renderer).
_ESCAPES = {ch: "\\" + ch for ch in "\\`*_[]<>!&"}
#: An inline code span: its text is shown as it reads, so a name inside it is left alone.
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


def literals_of(*sources: object) -> frozenset[str]:
    """The strings (keys and values, nested) of ``sources`` (a config, paths) that would read as Markdown
    or HTML: the names the renderers show as they read, wherever a sentence holds them (:func:`to_markdown`,
    :func:`contrastlab.report.html.render_html`). The pages' own sentences are Markdown; a name from the
    config, a file name or a metrics file is text."""
    found: set[str] = set()
    stack = list(sources)
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list | tuple | set | frozenset):
            stack += list(item)
        elif item is not None and not isinstance(item, bool | int | float):
            text = str(item)
            # a name of markup alone ("*") would escape the report's own bold wherever it stands
            if _MARKUP.search(text) and any(ch.isalnum() for ch in text):
                found.add(text)
    return frozenset(found)


def escape_markdown(text: str, literals: Iterable[str]) -> str:
    """``text`` (Markdown) with every occurrence of each of ``literals`` outside a code span
    backslash-escaped, so that a Markdown reader shows the name as it reads (longest names first)."""
    names = sorted((n for n in literals if n in text), key=len, reverse=True)
    if not names:
        return text
    pattern = re.compile("|".join(re.escape(n) for n in names))

    def escape(match: re.Match) -> str:
        return "".join(_ESCAPES.get(ch, ch) for ch in match.group(0))

    pieces, last = [], 0
    for span in _CODE_SPAN.finditer(text):
        pieces += [pattern.sub(escape, text[last : span.start()]), span.group(0)]
        last = span.end()
    return "".join([*pieces, pattern.sub(escape, text[last:])])


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
    if isinstance(content, list):
        return "".join(cell_text(piece) for piece in content)
    return str(content)


def _table_lines(table: Table, literals: Iterable[str] = ()) -> list[str]:
    if not table.rows:
        return ["none"]

    def cell(content: Content) -> str:  # one line, "|" escaped: free text cannot break the table
        return escape_markdown(" ".join(cell_text(content).split()), literals).replace("|", "\\|")

    rule = ["---:" if table.right_aligned(i) else "---" for i in range(len(table.header))]
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
        counts = " · ".join(f"{word} {n}" for word, n in block.counts.items())
        return [text(f"{block.lead}{counts} (of {block.of} claims).{block.tail}")]
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
    raise TypeError(f"not a block of a page: {block!r}")


def markdown_lines(blocks: list, literals: Iterable[str] = ()) -> list[str]:
    """The Markdown lines of ``blocks``: each block's lines and a blank line after each; each of
    ``literals`` (:func:`literals_of`) escaped wherever a sentence holds it, so that it reads as written
    (code blocks show everything as written already)."""
    literals = frozenset(literals)
    return [line for block in blocks for line in [*_block_lines(block, literals), ""]]


def to_markdown(blocks: list, literals: Iterable[str] = ()) -> str:
    """The page of ``blocks``: :func:`markdown_lines` joined, each line but the last ended."""
    return "\n".join(markdown_lines(blocks, literals))
