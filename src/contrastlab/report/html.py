"""``report.html``: the Markdown report as one self-contained page a reader navigates, figures embedded.

For readers who open reports in a browser (or mail them): the same content as ``report.md``, rendered
by Python-Markdown (``tables``, ``fenced_code``, ``toc``, ``attr_list``, ``md_in_html``) and finished on
its ElementTree by the Treeprocessors below, never by rewriting HTML text:

- **Anchors and contents** (:class:`HeadingIds`, then ``toc``): every heading gets a stable ``id``: a
  paper's section its key (``#nie2023``), a paper table its registry name (``#nie2023-table1``), a
  figure its name (``#nie2023-fig2a``), any other heading its section's id and its own words
  (``#nie2023-claims``, ``#cost-per-rule``). A contents list of headings 2-4 sits beside the page.
- **Figures** embedded as base64 ``data:`` URIs, so the file needs nothing beside it; links to tables
  and CSVs stay relative (they work when the page sits in the results folder).
- **Verdicts at a glance**: every claim verdict (a table's ``verdict`` column, and a line of counts
  ``Tally: reproduced 2 · …``) and every seed-noise marker of a table cell (≈ ▲ ▼ ? after a number) gets
  a coloured badge, ``<span class="badge v-<kind>">``. The words and markers stay inside the badge, so
  the page reads the same without colour (printed, or to a screen reader). A claim's verdict is one
  line (its badge and the share of its parts run), its reasoning folded under it (``<details>``).
- **The run's own rows and columns first**: in a paper grid (label columns, then a ``paper`` / ``ours``
  / ``Δ`` or ``config`` row per method) the methods whose every cell of ours reads "not configured" are
  folded into one line at the table's foot, "15 rows not configured by this preset: …", then likewise
  the value columns ("12 columns not configured …": the paper's backbones that a preset's stand-ins
  replace, their numbers shown in the stand-ins' columns); "not configured" cells are greyed.
  ``report.md`` and the table's own files keep every row and column.
- **Wide content scrolls in its own box**: each table sits in a ``<div class="table-scroll">``, code
  blocks scroll too, so the page is never wider than the window; a grid's label columns stay in view
  while its values scroll, a rule at their edge so that a value scrolled under them never reads as
  part of a label. Printed (A4 landscape), tables are not split where they fit on a page, their
  header row repeats and their text wraps to the page's width.

``tests/report/test_html.py`` measures the page in headless Chromium at 1400 px;
``docs/screenshots/`` shows it.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path
from xml.etree import ElementTree as ET

from markdown.extensions import Extension
from markdown.extensions.toc import slugify
from markdown.treeprocessors import Treeprocessor

from contrastlab.paths import atomic_write

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
    "within": ("#c8e6c9", "#1b5e20"),
    "above": ("#bbdefb", "#0d47a1"),
    "below": ("#ffcdd2", "#b71c1c"),
    "same": ("#c8e6c9", "#1b5e20"),
    "differs": ("#ffcdd2", "#b71c1c"),
    "off-grid": ("#e1bee7", "#4a148c"),
}
#: Verdict words (claims, searches) -> badge kind; longest first so "not reproduced" wins over "reproduced".
VERDICT_WORDS = {
    "paper unsupported": "paper-unsupported",
    "not reproduced": "not-reproduced",
    "reproduced": "reproduced",
    "undecided": "undecided",
    "not run": "not-run",
    "same within dev noise": "same",
    "same as published": "same",
    "published off grid": "off-grid",
    "differs": "differs",
    "not in paper": "not-run",
}
#: A table cell's seed-noise marker (tables.verdicts.MARKERS) -> (badge kind, the verdict's word).
CELL_MARKERS = {
    "≈": ("within", "within noise"),
    "▲": ("above", "above"),
    "▼": ("below", "below"),
    "?": ("undecided", "undecided"),
}
#: What a paper grid's cell of ours reads outside the config's grid (tables.assemble), and the cells
#: that then carry nothing (the Δ row's dash, a number the paper does not give, an empty cell).
NOT_CONFIGURED = "not configured"
_EMPTY_CELLS = {NOT_CONFIGURED, "–", "n/a", ""}
#: The label of a grid's published row; a method is folded only when every other row of it is empty.
_PAPER_ROW = "paper"
#: The contents list holds headings of these levels (the page's title, level 1, is its top).
TOC_DEPTH = "2-4"

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
h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2rem; margin-top: 2.5rem; }
.headerlink { color: #999; text-decoration: none; margin-left: 0.4rem; font-size: 0.8em; visibility: hidden; }
h1:hover .headerlink, h2:hover .headerlink, h3:hover .headerlink,
h4:hover .headerlink { visibility: visible; }
.table-scroll { overflow-x: auto; max-width: 100%; margin: 1rem 0; }
table { border-collapse: collapse; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; }
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
td.not-configured { color: #9a9a9a; }
img { max-width: 100%; height: auto; display: block; margin: 0.5rem 0; }
code { background: #f3f3f3; padding: 0 0.2rem; }
pre { background: #f6f6f6; padding: 0.6rem 0.8rem; overflow-x: auto; max-width: 100%; }
pre code { background: none; padding: 0; }
.commands pre { white-space: pre-wrap; overflow-wrap: anywhere; }
.badge { border-radius: 0.3rem; padding: 0 0.3rem; font-weight: 600; white-space: nowrap; }
details.why > summary { cursor: pointer; white-space: nowrap; }
details.why > div { margin-top: 0.2rem; font-size: 0.8rem; color: #444; min-width: 14rem; }
@media (max-width: 60rem) {
  .page { display: block; }
  nav.contents { position: static; max-height: none; border-right: none; border-bottom: 1px solid #ddd; }
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

_WORDS = re.compile("|".join(re.escape(w) for w in VERDICT_WORDS))
#: A count of a line of counts ("reproduced 2"), and such a line's opening: a paper's ``Tally:``, the
#: answer's ``**paper**: reproduced 1 · …`` lines (text after a bold name) and ``All papers:``.
_TALLY_ITEM = re.compile(rf"({'|'.join(re.escape(w) for w in VERDICT_WORDS)}) (\d+)")
_TALLY_OPENINGS = ("Tally: ", "All papers: ")
_ANSWER_TAIL = re.compile(r": reproduced \d")
#: A marker after a number (the Δ row: "+1.20 ▲", "-0.31 ≈†"), not the "± ?" of a claim's numbers.
_MARKER = re.compile(r"(?<=\d )[≈▲▼?]")
#: A figure's heading: its catalogue name, ``<experiment>/<figure>`` (figures.catalog).
_FIGURE_NAME = re.compile(r"[a-z0-9_]+/[a-z0-9_]+")


def badge(kind: str, text: str, title: str | None = None) -> str:
    """``text`` in a badge of ``kind`` (a key of :data:`BADGE_COLOURS`), as HTML."""
    extra = f' title="{html.escape(title)}"' if title else ""
    return f'<span class="badge v-{kind}"{extra}>{text}</span>'


def _badge(kind: str, text: str, title: str | None = None) -> ET.Element:
    element = ET.Element("span", {"class": f"badge v-{kind}"})
    if title:
        element.set("title", title)
    element.text = text
    return element


def _text(element: ET.Element) -> str:
    return "".join(element.itertext()).strip()


def _sub_elements(parent: ET.Element, pattern: re.Pattern, make) -> None:
    """Replace each match of ``pattern`` in ``parent``'s own text and in its children's tails by the
    element ``make(match)`` returns (a match it returns None for stays text)."""

    def split(text: str | None) -> tuple[str | None, list[ET.Element]]:
        lead, made, pos = text, [], 0
        for match in pattern.finditer(text or ""):
            element = make(match)
            if element is None:
                continue
            before = text[pos : match.start()]
            if made:
                made[-1].tail = before
            else:
                lead = before
            made.append(element)
            pos = match.end()
        if made:
            made[-1].tail = text[pos:]
        return lead, made

    children = list(parent)
    parent.text, made = split(parent.text)
    rebuilt = list(made)
    for child in children:
        child.tail, made = split(child.tail)
        rebuilt += [child, *made]
    parent[:] = rebuilt


# --- anchors ---------------------------------------------------------------------------------------


def _known_ids() -> dict[str, str]:
    """Heading text -> its id, for the headings whose name is known: each paper's section (its claim
    file's title -> the paper's key) and each paper table (its title -> its registry name)."""
    from contrastlab.report.claims import PAPERS, load_claims
    from contrastlab.tables import TABLES

    known = {load_claims(paper)["paper"]: paper for paper in PAPERS}
    known.update({spec.title: name.replace("_", "-") for name, spec in TABLES.items()})
    return known


def _figure_id(name: str) -> str:
    """A figure's id from its name: ``nie2023/nie2023_fig2a`` -> ``nie2023-fig2a``,
    ``oar_cifar10/lr_sweep`` -> ``oar-cifar10-lr-sweep``."""
    experiment, figure = name.split("/")
    figure = figure.removeprefix(f"{experiment}_")
    return f"{experiment}-{figure}".replace("_", "-")


class HeadingIds(Treeprocessor):
    """A stable ``id`` on every heading that has none (``attr_list``'s ``{#id}`` wins), in document order:
    a known heading (:func:`_known_ids`) or a figure's name its own; a level-2 heading the slug of its
    words; a deeper one the id of the heading above it and its slug (``nie2023-claims``). A repeat gets
    ``-2``, ``-3``. Each paper's section and table is listed in the contents under a short label."""

    def run(self, root: ET.Element) -> None:
        known = _known_ids()
        parent_of = {child: parent for parent in root.iter() for child in parent}
        used = {el.get("id") for el in root.iter() if el.get("id")}
        parents: dict[int, str] = {}  # level -> id of the last heading at that level
        for element in root.iter():
            if not (isinstance(element.tag, str) and re.fullmatch(r"h[1-6]", element.tag)):
                continue
            level, text = int(element.tag[1]), _text(element)
            if not element.get("id"):
                above = next((parents[k] for k in range(level - 1, 1, -1) if k in parents), None)
                if text in known:
                    anchor = known[text]
                elif _FIGURE_NAME.fullmatch(text):
                    anchor = _figure_id(text)
                else:  # a long heading by its words up to a colon, as the contents list names it
                    anchor = slugify(_short_label(text, known), "-") or "section"
                    anchor = f"{above}-{anchor}" if above and level > 2 else anchor
                element.set("id", _unique(anchor, used))
            parents = {k: v for k, v in parents.items() if k < level}
            parents[level] = element.get("id")
            label = _short_label(text, known)
            place = _FIGURE_NAME.fullmatch(text) and _figure_place(element, parent_of.get(element))
            if place:  # "Nie Fig. 2a — nie2023/nie2023_fig2a", listed as "Fig. 2a" under its paper
                element.text = f"{place} — {text}"
                label = place.split(" ", 1)[1]
            if label != text:
                element.set("data-toc-label", label)


#: A figure caption's opening, its place in the paper: "Nie Fig. 2a", "OAR Table 2 (synthetic)".
_CAPTION_PLACE = re.compile(r"^(\S+ (?:Fig\.|Table) [^:]{1,30}):")


def _figure_place(heading: ET.Element, parent: ET.Element | None) -> str | None:
    """The place in its paper that a figure's caption opens with (the first paragraph of text after the
    heading, :func:`contrastlab.report.sections._figure_lines`), None without one."""
    if parent is None:
        return None
    siblings = list(parent)
    for element in siblings[siblings.index(heading) + 1 :]:
        if element.tag != "p":
            return None
        if _text(element):  # the image's paragraph has no text
            match = _CAPTION_PLACE.match(_text(element))
            return match[1] if match else None
    return None


def _unique(anchor: str, used: set[str]) -> str:
    candidate, n = anchor, 1
    while candidate in used:
        n += 1
        candidate = f"{anchor}-{n}"
    used.add(candidate)
    return candidate


def _short_label(text: str, known: dict[str, str]) -> str:
    """The contents list's label: a paper's title up to its year, a table's title from its "Table" on
    (the paper's entry is above it), a long heading up to its colon ("Search of nie2023"); any other
    heading as it reads."""
    if text not in known:
        return text.split(":", 1)[0] if len(text) > 40 and ":" in text else text
    table = re.search(r",\s*(Tables? .*)$", text)
    year = re.match(r".*?\b(?:19|20)\d\d\b", text)
    return table[1] if table else (year[0] if year else text)


# --- the page's body ---------------------------------------------------------------------------------


class ReportBody(Treeprocessor):
    """After the inline patterns and the contents: figures embedded, verdicts badged, unconfigured rows
    folded, every table in its scroll box."""

    def __init__(self, md, base_dir: Path):
        super().__init__(md)
        self.base_dir = base_dir

    def run(self, root: ET.Element) -> None:
        parent_of = {child: parent for parent in root.iter() for child in parent}
        for image in list(root.iter("img")):
            self._embed(image, parent_of[image])
        for paragraph in root.iter("p"):
            if _is_count_line(paragraph):
                _sub_elements(paragraph, _TALLY_ITEM, _count_badge)
        ids = {element.get("id") for element in root.iter() if element.get("id")}
        for table in list(root.iter("table")):
            _link_in_page(table, ids)
            _badge_table(table)
            labels = _grid_labels(table)
            if labels in (2, 3):  # its label columns stay in view while its values scroll sideways
                table.set("class", f"grid labels-{labels}")
            if labels:
                _fold_unconfigured(table, labels)
            parent = parent_of[table]
            # focusable, so a keyboard scrolls it too
            box = ET.Element("div", {"class": "table-scroll", "tabindex": "0"})
            box.tail, table.tail = table.tail, None
            parent.insert(list(parent).index(table), box)
            parent.remove(table)
            box.append(table)

    def _embed(self, image: ET.Element, parent: ET.Element) -> None:
        """``![alt](path.png)`` inlined as a data URI; a figure missing on disk keeps its relative
        ``src`` and gets a visible note instead of failing (the report is written while some figures are
        still to be made)."""
        src = image.get("src", "")
        if not src.endswith(".png") or src.startswith("data:"):
            return
        path = self.base_dir / src
        if path.is_file():
            image.set("src", "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii"))
            return
        note = ET.Element("em", {"class": "missing"})
        note.text = f"figure not found: {path}"
        note.tail, image.tail = image.tail, None
        parent.insert(list(parent).index(image) + 1, note)


def _is_count_line(paragraph: ET.Element) -> bool:
    """A paragraph of verdict counts: ``Tally: …``, ``All papers: …`` or ``**<paper>**: reproduced 1 …``."""
    if (paragraph.text or "").startswith(_TALLY_OPENINGS):
        return True
    first = paragraph[0] if len(paragraph) else None
    return (
        first is not None
        and first.tag == "strong"
        and not (paragraph.text or "").strip()
        and bool(_ANSWER_TAIL.match(first.tail or ""))
    )


def _count_badge(match: re.Match) -> ET.Element | None:
    # a zero is no finding: left uncoloured
    return None if match[2] == "0" else _badge(VERDICT_WORDS[match[1]], match[0])


def _marker_badge(match: re.Match) -> ET.Element:
    kind, word = CELL_MARKERS[match[0]]
    return _badge(kind, match[0], word)


def _rows(table: ET.Element) -> tuple[list[ET.Element], list[ET.Element]]:
    """A table's header cells and its body rows."""
    head = table.find("thead/tr")
    body = table.find("tbody")
    return (list(head) if head is not None else []), (list(body) if body is not None else [])


#: What a verdict's one line keeps beside its word: the share of its parts that ran.
_PARTS_RUN = re.compile(r" \(\d+/\d+ parts run\)")


def _badge_verdict(cell: ET.Element) -> None:
    """A verdict cell's leading word in its badge. A verdict with reasoning after it (the parts
    contradicted, the seeds that would decide it, why the paper's tables do not support its sentence)
    becomes one line, the badge and the share of parts run, with the reasoning folded under it
    (``<details class="why">``)."""
    match = _WORDS.match(cell.text or "")
    if not match:
        return
    element = _badge(VERDICT_WORDS[match[0]], match[0])
    rest = cell.text[match.end() :]
    cell.text = None
    parts = _PARTS_RUN.match(rest)
    head = parts[0] if parts else ""
    why = rest[len(head) :].removeprefix(":").strip()
    if len(cell) or not why:  # nothing to fold (or not plain text): the badge and the rest as they read
        element.tail = rest
        cell.insert(0, element)
        return
    details = ET.SubElement(cell, "details", {"class": "why"})
    summary = ET.SubElement(details, "summary")
    summary.append(element)
    element.tail = head
    ET.SubElement(details, "div").text = why


def _badge_table(table: ET.Element) -> None:
    """The verdict column's leading words and every cell's seed-noise markers, each in a badge."""
    header, rows = _rows(table)
    verdict = [i for i, cell in enumerate(header) if _text(cell) == "verdict"]
    for row in rows:
        for i, cell in enumerate(row):
            if _text(cell) == NOT_CONFIGURED:  # greyed, so the run's own numbers stand out
                cell.set("class", "not-configured")
            if i in verdict:
                _badge_verdict(cell)
            else:
                _sub_elements(cell, _MARKER, _marker_badge)


#: The columns whose links name a table or figure of the page (the claims' "see", the answer's main
#: numbers): they go to its place on the page, not to its file.
IN_PAGE_COLUMNS = ("see", "main number")
#: A link to a rendered table's Markdown or a figure's PNG, relative to the report.
_PAGE_LINK = re.compile(r"tables/(?P<table>[A-Za-z0-9_]+)\.md|figures/(?P<figure>[a-z0-9_]+/[a-z0-9_]+)\.png")


def _link_in_page(table: ET.Element, ids: set[str]) -> None:
    """Each link of an :data:`IN_PAGE_COLUMNS` column to a table's or figure's file, pointed at its
    heading on the page (a table's id is its registry name, a figure's :func:`_figure_id`) where the
    page has it; a link to something the page does not show keeps its file."""
    header, rows = _rows(table)
    columns = [i for i, cell in enumerate(header) if _text(cell) in IN_PAGE_COLUMNS]
    for row in rows:
        for i in columns:
            for link in row[i].iter("a"):
                match = _PAGE_LINK.fullmatch(link.get("href", ""))
                if match is None:
                    continue
                anchor = match["table"].replace("_", "-") if match["table"] else _figure_id(match["figure"])
                if anchor in ids:
                    link.set("href", f"#{anchor}")


def _grid_labels(table: ET.Element) -> int:
    """How many label columns ``table`` has if it is a paper grid, else 0. A grid: label columns
    (left-aligned: the method, maybe its backbone or a parameter, then the row's role) and value columns
    (right-aligned), the role column reading ``paper`` on the published rows."""
    header, rows = _rows(table)
    labels = next((i for i, cell in enumerate(header) if "right" in cell.get("style", "")), 0)
    if labels < 2 or not any(_text(row[labels - 1]) == _PAPER_ROW for row in rows):
        return 0
    return labels


def _fold_unconfigured(table: ET.Element, labels: int) -> None:
    """A paper grid's (:func:`_grid_labels`) methods and value columns with nothing configured, each
    folded into one line at the table's foot. A method (:func:`_groups`) is folded when every value cell
    of its rows other than ``paper`` reads "not configured", a dash or "n/a", one at least "not
    configured"; then a column likewise, over the methods left (the paper's backbones a preset replaces
    by stand-ins: their numbers stand in the stand-ins' columns, :func:`~contrastlab.tables.render.
    stand_in_cells`)."""
    header, rows = _rows(table)
    groups = _groups(header, rows, labels)
    folded = [(name, members) for name, members, _ in groups if _unconfigured(members, labels)]
    body = table.find("tbody")
    for _, members in folded:
        for row in members:
            body.remove(row)
    kept = [(members, carried) for _, members, carried in groups if members[0] in list(body)]
    if folded:
        _name_kept_groups(kept)
    columns = _fold_columns(table, labels, [row for members, _ in kept for row in members])
    lines = []
    if folded:
        names = [name for name, _ in folded]
        named = [_text(cell).lower() for cell in header[: labels - 1] if _text(cell).lower() != "parameter"]
        noun = _GROUP_NOUNS.get(named[-1] if named else "", "groups of rows")
        count = sum(len(members) for _, members in folded)
        of = f"{len(names)} of {len(groups)} {noun}"
        lines.append((f"{count} rows not configured by this preset: {_listed(names)} ({of}; ", "row", names))
    if columns:
        of = f"{len(columns)} of {len(header) - labels} columns"
        noun = "column" if len(columns) == 1 else "columns"
        lines.append(
            (
                f"{len(columns)} {noun} not configured by this preset: {_listed(columns)} ({of}; ",
                "column",
                columns,
            )
        )
    width = str(len(table.find("thead/tr")))
    for text, kind, names in lines:
        line = ET.SubElement(body, "tr", {"class": "folded"})
        cell = ET.SubElement(line, "td", {"colspan": width, "title": ", ".join(names)})
        cell = ET.SubElement(cell, "span")  # stays in view while the grid scrolls sideways (CSS)
        cell.text = f"{text}the table's own files keep every {kind})"


def _listed(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 8 else ", ".join(names[:8]) + f" and {len(names) - 8} more"


def _fold_columns(table: ET.Element, labels: int, rows: list[ET.Element]) -> list[str]:
    """Remove the value columns of ``table`` whose every cell in ``rows`` (the methods left), other than
    the ``paper`` rows', reads "not configured", a dash or "n/a", one at least "not configured"; returns
    their headers."""
    header = list(table.find("thead/tr"))
    values = {
        j: [_text(row[j]) for row in rows if _text(row[labels - 1]) != _PAPER_ROW]
        for j in range(labels, len(header))
    }
    gone = [j for j, column in values.items() if NOT_CONFIGURED in column and set(column) <= _EMPTY_CELLS]
    for row in [table.find("thead/tr"), *rows]:
        cells = list(row)
        for j in reversed(gone):
            row.remove(cells[j])
    return [_text(header[j]) for j in gone]


#: What a grid's groups of rows are, by the header of their name column.
_GROUP_NOUNS = {"method": "methods", "loss": "losses"}


def _groups(header: list[ET.Element], rows: list[ET.Element], labels: int) -> list[tuple[str, list, dict]]:
    """A grid's rows by method: (its name, its rows, {column: name}). A method starts at a row with a
    name cell (a label cell before the role's, not a parameter's); an empty name cell repeats the one
    above it (a backbone is named once for its methods), so a name reads "BERT-base InfoNCE"."""
    columns = [i for i in range(labels - 1) if _text(header[i]).lower() != "parameter"]
    groups: list[tuple[str, list, dict]] = []
    carried = [""] * len(columns)
    for row in rows:
        names = [_text(row[i]) for i in columns]
        first = next((i for i, name in enumerate(names) if name), None)
        if first is not None or not groups:
            carried = carried[: first or 0] + names[first or 0 :]
            groups.append((" ".join(filter(None, carried)), [], dict(zip(columns, carried, strict=True))))
        groups[-1][1].append(row)
    return groups


def _name_kept_groups(kept: list[tuple[list, dict]]) -> None:
    """Each method left after folding opens with a rule, and names what the folded rows above it named
    (its backbone, when the row that named it was folded away)."""
    above: dict = {}
    for members, carried in kept:
        first = members[0]
        first.set("class", "group-start")
        for column, name in carried.items():
            if not _text(first[column]) and name and carried.get(column) != above.get(column):
                first[column].text = name
            if carried.get(column) != above.get(column):
                break  # the columns after the first that changed are named in the row already
        above = carried


def _unconfigured(rows: list[ET.Element], labels: int) -> bool:
    values = [_text(cell) for row in rows if _text(row[labels - 1]) != _PAPER_ROW for cell in row[labels:]]
    return bool(values) and NOT_CONFIGURED in values and set(values) <= _EMPTY_CELLS


class ReportExtension(Extension):
    """The report's Treeprocessors: ids before ``toc`` (priority 5) reads them, the body after it."""

    def __init__(self, base_dir: Path):
        super().__init__()
        self.base_dir = base_dir

    def extendMarkdown(self, md) -> None:  # noqa: N802 (Python-Markdown's name)
        md.treeprocessors.register(HeadingIds(md), "report_ids", 6)
        md.treeprocessors.register(ReportBody(md, self.base_dir), "report_body", 4)


def render_html(markdown_text: str, base_dir: str | Path, *, title: str = "contrastlab report") -> str:
    """The HTML page of ``markdown_text``: a contents list beside the body, an id on every heading, each
    ``![alt](path.png)`` (relative to ``base_dir``) embedded (:class:`ReportBody`)."""
    import markdown

    md = markdown.Markdown(
        extensions=[
            "tables",
            "fenced_code",
            "attr_list",
            "md_in_html",
            "toc",
            ReportExtension(Path(base_dir)),
        ],
        extension_configs={"toc": {"toc_depth": TOC_DEPTH, "permalink": "#", "permalink_title": "Link here"}},
        output_format="html",
    )
    body = md.convert(markdown_text)
    contents = md.toc.removeprefix('<div class="toc">').removesuffix("</div>\n").strip()
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        '<div class="page">\n<nav class="contents" aria-label="Contents"><strong>Contents</strong>\n'
        f"{contents}\n</nav>\n<main>\n{body}\n</main>\n</div>\n</body>\n</html>\n"
    )


def write_html_report(report_md: str | Path, html_path: str | Path | None = None) -> Path:
    """Render ``report_md`` to ``html_path`` (default: the same name with ``.html``), atomically."""
    report_md = Path(report_md)
    html_path = Path(html_path) if html_path is not None else report_md.with_suffix(".html")
    text = render_html(report_md.read_text(encoding="utf-8"), report_md.parent)
    with atomic_write(html_path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return html_path
