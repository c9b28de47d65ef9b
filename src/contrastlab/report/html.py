"""``report.html``: the Markdown report as one self-contained page, figures embedded.

For readers who open reports in a browser (or mail them): the same content as ``report.md``, rendered by
Python-Markdown (with its ``tables`` extension), every figure the report shows inlined as a base64
``data:`` URI so the file needs nothing beside it; links to tables and CSVs stay relative (they work
when the page sits in the results folder). A short style sheet keeps wide tables readable.

**Verdicts at a glance** (:func:`badge_verdicts`): every claim verdict (a table's ``verdict`` column, and
a paper's tally line ``Tally: reproduced 2 · …``) and every seed-noise marker of a table cell (≈ ▲ ▼ ?
after a Δ) gets a coloured badge, ``<span class="badge v-<kind>">``. The words and markers stay inside
the badge, so the page reads the same without colour (printed, or to a screen reader).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from contrastlab.paths import atomic_write

__all__ = ["badge", "badge_verdicts", "render_html", "write_html_report"]

_IMG = re.compile(r'<img alt="(?P<alt>[^"]*)" src="(?P<src>[^"]+\.png)"\s*/?>')

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

_CSS = """
body { font-family: system-ui, sans-serif; max-width: 75rem; margin: 2rem auto; padding: 0 1rem;
       line-height: 1.45; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.85rem; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; }
th { background: #f3f3f3; }
tr:nth-child(even) td { background: #fafafa; }
img { max-width: 100%; height: auto; display: block; margin: 0.5rem 0; }
code { background: #f3f3f3; padding: 0 0.2rem; }
.badge { border-radius: 0.3rem; padding: 0 0.3rem; font-weight: 600; white-space: nowrap; }
""" + "".join(
    f".badge.v-{kind} {{ background: {bg}; color: {fg}; }}\n" for kind, (bg, fg) in BADGE_COLOURS.items()
)

_WORDS = re.compile("|".join(re.escape(w) for w in VERDICT_WORDS))
#: A line of counts: a paper's ``Tally:``, the answer's ``<strong>paper</strong>: reproduced 1 · …`` lines
#: and ``All papers:``.
_TALLY = re.compile(r"<p>(?:Tally: |All papers: |<strong>[^<]*</strong>: reproduced \d).*?</p>", re.S)
_TALLY_ITEM = re.compile(rf"({'|'.join(re.escape(w) for w in VERDICT_WORDS)}) (\d+)")
_TABLE = re.compile(r"<table>.*?</table>", re.S)
_ROW = re.compile(r"<tr>(.*?)</tr>", re.S)
_CELL = re.compile(r"<(t[dh])([^>]*)>(.*?)</t[dh]>", re.S)
#: A number followed by a marker (the Δ row: "+1.20 ▲", "-0.31 ≈†"), not the "± ?" of a claim's numbers.
_MARKER = re.compile(r"(?<=\d) ([≈▲▼?])")


def badge(kind: str, text: str, title: str | None = None) -> str:
    """``text`` in a badge of ``kind`` (a key of :data:`BADGE_COLOURS`)."""
    extra = f' title="{html.escape(title)}"' if title else ""
    return f'<span class="badge v-{kind}"{extra}>{text}</span>'


def _badge_cell(text: str, is_verdict: bool) -> str:
    if is_verdict:
        match = _WORDS.match(text)
        return badge(VERDICT_WORDS[match[0]], match[0]) + text[match.end() :] if match else text
    return _MARKER.sub(lambda m: " " + badge(CELL_MARKERS[m[1]][0], m[1], CELL_MARKERS[m[1]][1]), text)


def _badge_table(table: str) -> str:
    column: list[int] = []  # the verdict column's index, once the header row is read

    def row(match: re.Match) -> str:
        cells = _CELL.findall(match[1])
        if cells and cells[0][0] == "th":
            column[:] = [i for i, (_, _, text) in enumerate(cells) if text.strip() == "verdict"]
            return match[0]
        inner = "\n".join(
            f"<{tag}{attrs}>{_badge_cell(text, i in column)}</{tag}>"
            for i, (tag, attrs, text) in enumerate(cells)
        )
        return f"<tr>\n{inner}\n</tr>"

    return _ROW.sub(row, table)


def badge_verdicts(body: str) -> str:
    """``body`` (HTML) with a coloured badge on every verdict: the words of each table's ``verdict``
    column, the ≈ ▲ ▼ ? markers after a number in any table cell, and the non-zero counts of a line of
    counts."""
    body = _TABLE.sub(lambda m: _badge_table(m[0]), body)

    def count(item: re.Match) -> str:  # a zero is no finding: left uncoloured
        return item[0] if item[2] == "0" else badge(VERDICT_WORDS[item[1]], f"{item[1]} {item[2]}")

    return _TALLY.sub(lambda m: _TALLY_ITEM.sub(count, m[0]), body)


def render_html(markdown_text: str, base_dir: str | Path, *, title: str = "contrastlab report") -> str:
    """The HTML page of ``markdown_text``, each ``![alt](path.png)`` (relative to ``base_dir``) embedded.

    A figure missing on disk keeps its relative ``src`` and gets a visible note instead of failing: the
    report is written even while some figures are still to be made.
    """
    import markdown

    body = markdown.markdown(markdown_text, extensions=["tables", "md_in_html"], output_format="html")
    base_dir = Path(base_dir)

    def embed(match: re.Match) -> str:
        path = base_dir / html.unescape(match["src"])
        if not path.is_file():
            return f"{match[0]}<p><em>figure not found: {html.escape(str(path))}</em></p>"
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f'<img alt="{match["alt"]}" src="data:image/png;base64,{data}">'

    body = badge_verdicts(_IMG.sub(embed, body))
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def write_html_report(report_md: str | Path, html_path: str | Path | None = None) -> Path:
    """Render ``report_md`` to ``html_path`` (default: the same name with ``.html``), atomically."""
    report_md = Path(report_md)
    html_path = Path(html_path) if html_path is not None else report_md.with_suffix(".html")
    text = render_html(report_md.read_text(encoding="utf-8"), report_md.parent)
    with atomic_write(html_path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return html_path
