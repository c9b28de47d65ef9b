"""``report.html``: the report's document (:mod:`.document`) as one self-contained page a reader navigates,
figures embedded as ``data:`` URIs. It is rendered from the blocks, never from report.md, so what it
shows apart is what the writer knew: stable heading ids (:func:`.document.assign_ids`) and a
contents list beside the page; in-page links to the tables and figures it shows; a coloured badge for
every verdict, tally count and seed-noise marker (the words stay inside, so the page reads the same
without colour), a claim's reasoning folded under its verdict; a grid's unconfigured rows and columns
folded at its foot (:mod:`.folding`); wide tables and code scrolling in their own box, a grid's label
columns frozen; tables whole in print. ``tests/report/test_html.py`` measures the page in headless
Chromium; ``docs/screenshots/`` shows it.
"""

from __future__ import annotations

import base64
import functools
import html
from collections.abc import Iterable
from pathlib import Path

from contrastlab.blocks import (
    Bullets,
    Cell,
    Code,
    Figure,
    Fold,
    Heading,
    Link,
    Paragraph,
    Table,
    Tally,
    Verdict,
    kind_of,
)
from contrastlab.paths import write_text
from contrastlab.report.document import assign_ids, short_label
from contrastlab.report.folding import FoldedGrid, fold

__all__ = ["BADGE_COLOURS", "badge", "render_html", "write_html_report"]

#: Badge colours (background, text) per verdict kind: green reproduced / within noise / matched, red not
#: reproduced / below / differs, blue above, amber undecided, grey not run or nothing to compare. Every
#: pair has a contrast ratio above 4.5 (WCAG AA), and the word or marker stays inside the badge.
BADGE_COLOURS = {
    "reproduced": ("#c8e6c9", "#1b5e20"),
    "not-reproduced": ("#ffcdd2", "#b71c1c"),
    "paper-unsupported": ("#d1c4e9", "#311b92"),
    "undecided": ("#ffe0b2", "#8a4b00"),
    "not-run": ("#e0e0e0", "#424242"),
    "not-configured": ("#e0e0e0", "#424242"),
    "within": ("#c8e6c9", "#1b5e20"),
    "above": ("#bbdefb", "#0d47a1"),
    "below": ("#ffcdd2", "#b71c1c"),
    "same": ("#c8e6c9", "#1b5e20"),
    "differs": ("#ffcdd2", "#b71c1c"),
    "off-grid": ("#e1bee7", "#4a148c"),
}
#: A grid cell's seed-noise badge kind -> the verdict's word (the badge's title).
MARKER_WORDS = {"within": "within noise", "above": "above", "below": "below", "undecided": "undecided"}
#: The contents list holds headings of these levels (the page's title, level 1, is its top).
TOC_LEVELS = range(2, 5)
#: Characters that can make a text Markdown (a link, code, emphasis, raw HTML, an escape or an entity):
#: a text without any is escaped as it reads.
_SYNTAX = "[`*_<\\&!"
_NOT_CONFIGURED = ' class="not-configured"'

_CSS = """
* { box-sizing: border-box; }
body { font-family: system-ui, sans-serif; margin: 0; line-height: 1.45; color: #222; }
.page { display: grid; grid-template-columns: 17rem minmax(0, 1fr); max-width: 110rem; margin: 0 auto; }
nav.contents { position: sticky; top: 0; align-self: start; max-height: 100vh; overflow-y: auto;
               padding: 1rem 0.8rem; border-right: 1px solid #ddd; font-size: 0.8rem; background: #fcfcfc; }
nav.contents > strong { display: block; margin-bottom: 0.4rem; font-size: 0.95rem; }
nav.contents ul { list-style: none; margin: 0; padding-left: 0.8rem; }
nav.contents > ul { padding-left: 0; }
nav.contents li { margin: 0.15rem 0; }
nav.contents a { color: #1a4f8b; text-decoration: none; }
nav.contents a:hover { text-decoration: underline; }
main { padding: 1rem 2rem 3rem; min-width: 0; }
h1, h2, h3, h4 { scroll-margin-top: 0.5rem; }
h1 { font-size: 1.6rem; margin: 0.4rem 0 0; }
h1 + h2 { margin-top: 1rem; }
h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2rem; margin-top: 2.5rem; }
.headerlink { color: #999; text-decoration: none; margin-left: 0.4rem; font-size: 0.8em; visibility: hidden; }
h1:hover .headerlink, h2:hover .headerlink, h3:hover .headerlink,
h4:hover .headerlink { visibility: visible; }
.table-scroll { overflow-x: auto; max-width: 100%; margin: 1rem 0; }
table { border-collapse: collapse; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; }
/* the tables other than the grids set tighter: the first screen's fits beside the contents at 1024 px */
table:not(.grid) { font-size: 0.8rem; line-height: 1.3; }
table:not(.grid) th, table:not(.grid) td { padding: 0.15rem 0.35rem; }
th { background: #f3f3f3; }
tr:nth-child(even) td { background: #fafafa; }
tr.group-start td { border-top: 2px solid #999; }
.labels-2 tr:not(.folded) > :nth-child(-n+2), .labels-3 tr:not(.folded) > :nth-child(-n+3) {
  position: sticky; z-index: 1; background: #fff; }
/* separate borders: a sticky cell's borders move with it (collapsed ones stay behind, letting the
   scrolled values show through) */
.grid { border-collapse: separate; border-spacing: 0; border: solid #ccc; border-width: 1px 0 0 1px; }
.grid th, .grid td { border-width: 0 1px 1px 0; }
.grid tr:nth-child(even):not(.folded) > td { background: #fafafa; }
.grid thead tr:not(.folded) > th:nth-child(n) { background: #f3f3f3; }
tr.folded span { position: sticky; left: 0.5rem; display: inline-block; max-width: 60rem; }
.grid.labels-2 tr:not(.folded) > :nth-child(1) { left: 0; min-width: 8rem; max-width: 8rem; }
.grid.labels-2 tr:not(.folded) > :nth-child(2) { left: 8rem; min-width: 3.6rem; max-width: 3.6rem; }
.grid.labels-3 tr:not(.folded) > :nth-child(1) { left: 0; min-width: 7rem; max-width: 7rem; }
.grid.labels-3 tr:not(.folded) > :nth-child(2) { left: 7rem; min-width: 8rem; max-width: 8rem; }
.grid.labels-3 tr:not(.folded) > :nth-child(3) { left: 15rem; min-width: 3.6rem; max-width: 3.6rem; }
.grid.labels-2 tr:not(.folded) > :nth-child(2), .grid.labels-3 tr:not(.folded) > :nth-child(3) {
  border-right: 2px solid #777; }
tr.folded td { font-style: italic; color: #555; background: #f6f6f6; white-space: normal; }
td[style*="right"] { white-space: nowrap; }
td.not-configured { color: #707070; }  /* greyed, yet 4.7:1 on a striped row (WCAG AA) */
img { max-width: 100%; height: auto; display: block; margin: 0.5rem 0; }
code { background: #f3f3f3; padding: 0 0.2rem; }
pre { background: #f6f6f6; padding: 0.6rem 0.8rem; overflow-x: auto; max-width: 100%; }
pre code { background: none; padding: 0; }
.commands pre { white-space: pre-wrap; overflow-wrap: anywhere; }
.badge { border-radius: 0.3rem; padding: 0 0.3rem; font-weight: 600; white-space: nowrap; }
.badge.v-backbone { display: block; padding: 0; font-weight: normal; font-size: 0.7em; color: #555;
  white-space: normal; }
details.why > summary { cursor: pointer; white-space: nowrap; }
details.why > div { margin-top: 0.2rem; font-size: 0.8rem; color: #444; min-width: 14rem; }
@media (max-width: 80rem) {  /* 1024 px: the answer's table beside a narrower contents list */
  .page { grid-template-columns: 13rem minmax(0, 1fr); }
  main { padding: 0.5rem 1.2rem 3rem; }
}
@media (max-width: 60rem) {  /* the contents above the page, in a box that scrolls: the answer on screen */
  .page { display: block; }
  nav.contents { position: static; max-height: 35vh; border-right: none; border-bottom: 1px solid #ddd; }
}
@page { size: A4 landscape; margin: 1cm; }
@media print {
  .page { display: block; }
  nav.contents { position: static; max-height: none; border: none; background: none; }
  .headerlink { display: none; }
  .table-scroll { overflow: visible; }
  table { break-inside: avoid; font-size: 0.6rem; }
  th, td { white-space: normal !important; padding: 0.1rem 0.25rem; }
  .grid.grid tr:not(.folded) > :nth-child(n) { position: static; min-width: 0; max-width: none;
                                                box-shadow: none; }
  thead { display: table-header-group; }
  tr, img { break-inside: avoid; }
  h2, h3, h4 { break-after: avoid; }
  pre { white-space: pre-wrap; overflow: visible; }
}
""" + "".join(
    f".badge.v-{kind} {{ background: {bg}; color: {fg}; }}\n" for kind, (bg, fg) in BADGE_COLOURS.items()
)


def badge(kind: str, text: str, title: str | None = None) -> str:
    """``text`` in a badge of ``kind`` (a key of :data:`BADGE_COLOURS`), as HTML."""
    extra = f' title="{html.escape(title)}"' if title else ""
    return f'<span class="badge v-{kind}"{extra}>{text}</span>'


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


#: Link targets a page may open: relative ones (no scheme) and these schemes. A ``javascript:`` link in a
#: name reads as text.
_SCHEMES = {"", "http", "https", "mailto"}


def _safe_href(href: str) -> bool:
    """Whether ``href`` (as a browser reads it: entities decoded, controls and spaces dropped) opens a
    relative path, an anchor or an http(s)/mailto address."""
    plain = "".join(ch for ch in html.unescape(href) if ch > " ")
    scheme = plain.split(":", 1)[0].lower() if ":" in plain.split("/", 1)[0] else ""
    return scheme in _SCHEMES


@functools.cache
def _markdown():
    """Python-Markdown for the report's inline text, raw HTML off: a tag in any text (a name from the
    config, a file name, a metrics file) is shown as written, never parsed; a link or image whose target
    is not a relative path or http(s)/mailto reads as its Markdown."""
    import markdown  # loaded only when a page is rendered
    from markdown.treeprocessors import Treeprocessor

    class SafeLinks(Treeprocessor):
        def run(self, root):
            for element in [e for e in root.iter() if e.tag in ("a", "img")]:
                target = element.get("href" if element.tag == "a" else "src", "")
                if element.tag == "img" or not _safe_href(target):
                    if element.tag == "img":
                        element.text = "!" + element.get("alt", "")  # ![alt](src) as written
                    element.tag = "span"  # the link or image as the text it was written as: [text](target)
                    element.attrib.clear()
                    element.text = "[" + (element.text or "")
                    if len(element):
                        element[-1].tail = (element[-1].tail or "") + f"]({target})"
                    else:
                        element.text += f"]({target})"

    md = markdown.Markdown(output_format="html")
    md.preprocessors.deregister("html_block")
    md.inlinePatterns.deregister("html")
    md.treeprocessors.register(SafeLinks(md), "safe_links", 15)  # after the inline patterns (20)
    return md


def inline(text: str, literals: frozenset[str] = frozenset()) -> str:
    """``text`` (Markdown inline: bold, code, links) as HTML, its leading and trailing spaces kept; each of
    ``literals`` in it (names from the config, file names: :func:`contrastlab.blocks.literals_of`) shown as it
    reads, HTML-escaped, never read as Markdown."""
    core = text.strip()
    names = sorted((n for n in literals if n in core), key=len, reverse=True)
    stand_ins = {}
    for i, name in enumerate(names):  # a token Markdown leaves alone, put back once it has rendered
        token = f"CLLITERAL{i}X{len(core)}Q"
        stand_ins[token] = html.escape(name)
        core = core.replace(name, token)
    if any(ch in core for ch in _SYNTAX):
        _markdown().reset()
        out = _markdown().convert(core).removeprefix("<p>").removesuffix("</p>")
    else:
        out = _escape(core)
    for token, name in stand_ins.items():
        out = out.replace(token, name)
    return text[: len(text) - len(text.lstrip())] + out + text[len(text.rstrip()) :]


class Page:
    """One page's rendering: the ids of its headings and figures (:func:`.document.assign_ids`), its
    contents entries (level, id, label) as its headings are rendered, and the folder of its figures."""

    def __init__(self, blocks: list, base_dir: Path, literals: frozenset[str] = frozenset()):
        self.literals = literals
        self.ids = assign_ids(blocks)
        self.on_page = set(self.ids.values())
        self.base_dir = base_dir
        self.contents: list[tuple[int, str, str]] = []

    def inline(self, text: str) -> str:
        return inline(text, self.literals)

    def blocks(self, blocks: list) -> str:
        return "\n".join(self.block(block) for block in blocks)

    def block(self, block) -> str:
        if isinstance(block, Heading):
            return self.heading(
                block, block.level, self.inline(block.text), block.label or short_label(block.text)
            )
        if isinstance(block, Figure):
            return self.figure(block)
        if isinstance(block, Table):
            return self.table(block)
        if isinstance(block, Tally):  # a zero is no finding: left uncoloured
            counts = [badge(kind_of(w), f"{w} {n}") if n else f"{w} {n}" for w, n in block.counts.items()]
            lead, tail = self.inline(block.lead), self.inline(block.tail)
            return f"<p>{lead}{' · '.join(counts)} (of {block.of} claims).{tail}</p>"
        if isinstance(block, Paragraph):
            return f"<p>{self.inline(block.text)}</p>"
        if isinstance(block, Bullets):
            return "<ul>\n" + "".join(f"<li>{self.inline(item)}</li>\n" for item in block.items) + "</ul>"
        if isinstance(block, Code):
            language = f' class="language-{block.language}"' if block.language else ""
            code = f"<pre><code{language}>" + _escape("\n".join(block.lines)) + "\n</code></pre>"
            return f'<div class="{block.box}">\n{code}\n</div>' if block.box else code
        if isinstance(block, Fold):
            summary = f"<summary>{self.inline(block.summary)}</summary>"
            return f"<details>{summary}\n{self.blocks(block.blocks)}\n</details>"
        raise TypeError(f"not a block of the report: {block!r}")

    def heading(self, block, level: int, inner: str, label: str) -> str:
        anchor = self.ids[id(block)]
        if level in TOC_LEVELS:
            self.contents.append((level, anchor, label))
        link = f'<a class="headerlink" href="#{anchor}" title="Link here">#</a>'
        return f'<h{level} id="{anchor}">{inner}{link}</h{level}>'

    def figure(self, figure: Figure) -> str:
        """A figure's heading (its place in its paper before its name; listed by place), its PNG inlined
        as a data URI (one missing on disk keeps its relative ``src`` and gets a visible note instead of
        failing: the report is written while some figures are still to be made) and its caption."""
        title = f"{figure.place} — {figure.name}" if figure.place else figure.name
        label = figure.place.split(" ", 1)[1] if figure.place else figure.name
        path = self.base_dir / figure.image
        src, missing = figure.image, f'<em class="missing">{_escape(f"figure not found: {path}")}</em>'
        if path.is_file():
            src, missing = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii"), ""
        image = f'<p><img alt="{html.escape(figure.name)}" src="{html.escape(src)}">{missing}</p>'
        caption = f"<p>{self.inline(figure.caption)} ({self.cell(figure.files)})</p>"
        return "\n".join([self.heading(figure, 4, _escape(title), label), image, caption])

    def cell(self, content) -> str:
        """A cell: a link to a table or figure the page shows goes to its place; a seed-noise marker and
        a verdict's word in their badges, a verdict's reasoning folded under it; any other value its text."""
        if not isinstance(content, list | Link | Cell | Verdict):
            return self.inline(str(content))
        if isinstance(content, list):
            return "".join(self.cell(piece) for piece in content)
        if isinstance(content, Link):
            href = f"#{content.anchor}" if content.anchor in self.on_page else content.href
            text = _escape(content.text)
            return f'<a href="{html.escape(href)}">{text}</a>' if href else text
        if isinstance(content, Cell) and content.marker:
            before, marker, after = content.text.rpartition(content.marker)
            return (
                self.inline(before)
                + badge(content.kind, marker, MARKER_WORDS[content.kind])
                + self.inline(after)
            )
        if isinstance(content, Cell) and content.kind not in ("", "not-configured"):
            return badge(content.kind, _escape(content.text))  # a count of a verdict, say
        if isinstance(content, Cell):
            return self.inline(content.text)
        word, why = badge(content.kind, content.word), content.tail.removeprefix(":").strip()
        if not why:
            return word + self.inline(content.head)
        summary = f"<summary>{word}{self.inline(content.head)}</summary>"
        return f'<details class="why">{summary}<div>{self.inline(why)}</div></details>'

    def table(self, table: Table) -> str:
        """A table in its scroll box (focusable, so a keyboard scrolls it too); a paper grid (``labels``
        2 or 3) keeps its label columns in view while its values scroll, its unconfigured methods and
        columns folded (:func:`.folding.fold`), its cells outside the config's grid greyed."""
        if not table.rows:
            return "<p>none</p>"
        grid = fold(table) if table.labels else FoldedGrid(table.header, table.rows)
        mark = ' style="text-align: right;"'
        align = [mark if table.right_aligned(j) else "" for j in range(len(grid.header))]
        head = "".join(f"<th{a}>{self.inline(h)}</th>\n" for a, h in zip(align, grid.header, strict=True))
        body = ""
        for i, row in enumerate(grid.rows):
            body += '<tr class="group-start">\n' if i in grid.starts else "<tr>\n"
            for a, c in zip(align, row, strict=True):
                greyed = _NOT_CONFIGURED if isinstance(c, Cell) and c.kind == "not-configured" else ""
                body += f"<td{greyed}{a}>{self.cell(c)}</td>\n"
            body += "</tr>\n"
        for text, names in grid.lines:  # the span stays in view while the grid scrolls sideways (CSS)
            cell = (
                f'<td colspan="{len(grid.header)}" title="{html.escape(names)}"><span>{_escape(text)}</span>'
            )
            body += f'<tr class="folded">{cell}</td></tr>\n'
        css = f' class="grid labels-{table.labels}"' if table.labels in (2, 3) else ""
        return (
            f'<div class="table-scroll" tabindex="0"><table{css}>\n<thead>\n<tr>\n{head}</tr>\n</thead>\n'
            f"<tbody>\n{body}</tbody>\n</table></div>"
        )

    def nav(self) -> str:
        """The contents list: nested lists of the headings of levels 2-4, each linking its id."""
        out: list[str] = []
        levels: list[int] = []  # of the lists open
        for level, anchor, label in self.contents:
            if not levels or level > levels[-1]:
                out.append("<ul>\n")
                levels.append(level)
            else:
                while len(levels) > 1 and level < levels[-1]:
                    out.append("</li>\n</ul>\n")
                    levels.pop()
                out.append("</li>\n")
            out.append(f'<li><a href="#{anchor}">{_escape(label)}</a>')
        return "".join(out + ["</li>\n</ul>\n"] * len(levels)).removesuffix("\n")


def render_html(
    blocks: list, base_dir: str | Path, *, title: str = "contrastlab report", literals: Iterable[str] = ()
) -> str:
    """The HTML page of ``blocks``: a contents list beside the body, an id on every heading, each
    figure's PNG (relative to ``base_dir``) embedded, ``literals`` shown as they read; raw HTML off."""
    page = Page(blocks, Path(base_dir), frozenset(literals))
    body = page.blocks(blocks)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        '<div class="page">\n<nav class="contents" aria-label="Contents"><strong>Contents</strong>\n'
        f"{page.nav()}\n</nav>\n<main>\n{body}\n</main>\n</div>\n</body>\n</html>\n"
    )


def write_html_report(
    blocks: list, html_path: str | Path, literals: Iterable[str] = (), title: str | None = None
) -> Path:
    """Render the report's ``blocks`` to ``html_path`` (its figures read from beside it), atomically;
    ``title`` (the browser's tab) defaults to the report's first heading."""
    html_path = Path(html_path)
    if title is None:
        title = next(
            (b.text for b in blocks if isinstance(b, Heading) and b.level == 1), "contrastlab report"
        )
    return write_text(html_path, render_html(blocks, html_path.parent, literals=literals, title=title))
