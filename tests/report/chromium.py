"""A report page measured in headless Chromium through its command line: :func:`measure` loads a copy
with a script that writes the laid-out page's numbers into the DOM as JSON, and ``--dump-dom`` hands
them back."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

#: Headless, offline and quiet: no sandbox (containers), no GPU, no network of its own.
FLAGS = """--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
    --disable-component-update --disable-sync""".split()

#: Runs at the end of the page, once the layout is known: the contents list's links and whether each
#: names an element's id, every heading's id, the page's width and each box that could widen it.
_MEASURE = """<script>
(() => {
  const ids = new Set([...document.querySelectorAll('[id]')].map(e => e.id));
  const links = [...document.querySelectorAll('nav.contents a')].map(a => a.getAttribute('href'));
  const headings = [...document.querySelectorAll('main h1, main h2, main h3, main h4, main h5, main h6')];
  const viewport = document.documentElement.clientWidth;
  const right = e => Math.ceil(e.getBoundingClientRect().right);
  const boxes = [...document.querySelectorAll('.table-scroll, pre')];
  const tables = [...document.querySelectorAll('main table')];
  // the first wide paper grid scrolled to its far right: where its first label cell is then
  const grid = [...document.querySelectorAll('table.grid')]
    .find(t => t.scrollWidth > t.parentElement.clientWidth);
  let scrolled = null, label_offset = null;
  if (grid) {
    const box = grid.parentElement, cell = grid.querySelector('tbody td');
    box.scrollLeft = box.scrollWidth;
    scrolled = box.scrollLeft;
    label_offset = Math.round(cell.getBoundingClientRect().left - box.getBoundingClientRect().left);
    box.scrollLeft = 0;
  }
  // issue 65: the first screen (toy warning, main numbers, counts), folded columns, in-page links, one-line
  // verdicts, the add-seeds lines on screen, and the frozen label columns' edge
  const top = e => e ? Math.round(e.getBoundingClientRect().top + window.scrollY) : null;
  const toy = [...document.querySelectorAll('main p > strong')].find(s => s.textContent === 'Toy numbers');
  const heads = t => [...t.querySelectorAll('thead th')].map(h => h.textContent);
  const headed = name => tables.filter(t => heads(t).includes(name));
  const headlines = headed('main number')[0];
  // issue 78: the claims' tally is the headline table's columns, the key to its marks right below it
  const tally = headlines
    ? [...headlines.querySelectorAll('thead th')].find(h => h.textContent === 'reproduced') : null;
  const key = [...document.querySelectorAll('main p')].find(p => p.textContent.startsWith('Key: '));
  const see = headed('see').flatMap(t => [...t.querySelectorAll('tbody a')].map(a => a.getAttribute('href')));
  const commands = [...document.querySelectorAll('.commands pre')];
  const folded = [...document.querySelectorAll('tr.folded')].map(r => r.textContent);
  const summaries = [...document.querySelectorAll('details.why > summary')];
  const lineOf = e => parseFloat(getComputedStyle(e).lineHeight);
  let edge = null;
  if (grid) {  // the rule at the right of the labels' last column (the frozen edge)
    const labels = grid.classList.contains('labels-3') ? 3 : 2;
    const style = getComputedStyle(grid.querySelector('tbody tr:not(.folded)').children[labels - 1]);
    edge = style.borderRightWidth + ' ' + style.borderRightStyle + ' ' + style.borderRightColor;
  }
  const result = {
    toy_top: top(toy),
    first_tally_top: top(tally),
    headline_rows: headlines ? headlines.querySelectorAll('tbody tr').length : 0,
    headline_bottom: headlines ? Math.round(headlines.getBoundingClientRect().bottom + window.scrollY) : null,
    headline_hidden_px: headlines ? headlines.scrollWidth - headlines.parentElement.clientWidth : null,
    tally_columns: headlines ? heads(headlines).slice(-5) : [],
    key_top: top(key),
    key_text: key ? key.textContent : null,
    window_height: window.innerHeight,
    not_configured_cells: document.querySelectorAll('td.not-configured').length,
    folded_columns: folded.filter(text => / columns? not configured/.test(text)).length,
    see_links: see.length,
    see_not_in_page: see.filter(h => !h.startsWith('#') || !ids.has(decodeURIComponent(h.slice(1)))),
    verdicts_folded: summaries.length,
    verdict_lines: summaries.map(s => Math.round(s.getBoundingClientRect().height / lineOf(s))),
    verdict_reasons_shown: [...document.querySelectorAll('details.why')].filter(d => d.open).length,
    commands_hidden_px: commands.map(p => p.scrollWidth - p.clientWidth),
    command_lines: commands.map(p => p.textContent.trim().split('\\n').length),
    frozen_edge: edge,
    grid_scrolled_by: scrolled,
    grid_label_offset_when_scrolled: label_offset,
    links: links,
    unresolved: links.filter(h => !h.startsWith('#') || !ids.has(decodeURIComponent(h.slice(1)))),
    heading_ids: headings.map(h => h.id),
    headings_without_id: headings.filter(h => !h.id).map(h => h.textContent),
    viewport: viewport,
    inner_width: window.innerWidth,
    scroll_width: document.documentElement.scrollWidth,
    boxes_past_viewport: boxes.filter(e => right(e) > viewport).map(e => e.className || e.tagName),
    tables: tables.length,
    tables_outside_a_box: tables.filter(t => !t.parentElement.classList.contains('table-scroll')).length,
    tables_scrolling_in_their_box: tables.filter(t => t.scrollWidth > t.parentElement.clientWidth).length,
    folded_rows: folded,
  };
  const out = document.createElement('pre');
  out.id = 'browser-measure';
  out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
})();
</script>"""


def browser() -> str | None:
    """The Chromium on this machine, if any."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _run(
    page: Path, args: list[str], width: int, height: int, extra: str = ""
) -> subprocess.CompletedProcess:
    """Chromium with ``args`` on a copy of ``page`` beside it (its relative links intact), ``extra`` before
    its ``</body>``."""
    probe = page.with_name(page.stem + ".probe.html")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", extra + "</body>"), encoding="utf-8")
    window = f"--window-size={width},{height}"
    try:
        with tempfile.TemporaryDirectory() as profile:  # a fresh profile each time: nothing carried over
            return subprocess.run(
                [browser(), *FLAGS, f"--user-data-dir={profile}", window, *args, probe.as_uri()],
                capture_output=True,
                text=True,
                timeout=180,
            )
    finally:
        probe.unlink()


def measure(page: Path, width: int = 1400, height: int = 900) -> dict:
    """The laid-out ``page`` at ``width`` px (see :data:`_MEASURE` for the keys)."""
    run = _run(page, ["--dump-dom"], width, height, extra=_MEASURE + "\n")
    assert run.returncode == 0, run.stderr[-2000:]
    start = run.stdout.index('<pre id="browser-measure">') + len('<pre id="browser-measure">')
    import html

    return json.loads(html.unescape(run.stdout[start : run.stdout.index("</pre>", start)]))


def screenshot(
    page: Path, out: Path, width: int = 1400, height: int = 900, anchor: str = "", sideways: bool = False
) -> Path:
    """A PNG of the window's first screen of ``page``, or of the screen a link to ``#anchor`` opens
    (``sideways``: every table's box scrolled to its right end). It scrolls the body column, not the window,
    which headless Chromium paints blank when scrolled."""
    scroll = (
        "<style>html, body { height: 100%; overflow: hidden; } .page { height: 100vh; }"
        " main { height: 100vh; overflow-y: auto; }</style>\n<script>(() => {"
        f" const main = document.querySelector('main'), to = document.getElementById({json.dumps(anchor)});"
        " main.scrollTop = to.getBoundingClientRect().top - main.getBoundingClientRect().top - 8;"
        + (
            " document.querySelectorAll('.table-scroll').forEach(b => b.scrollLeft = b.scrollWidth);"
            if sideways
            else ""
        )
        + " })();</script>\n"
    )
    run = _run(page, [f"--screenshot={out}"], width, height, extra=scroll if anchor else "")
    assert run.returncode == 0 and out.exists(), run.stderr[-2000:]
    return out


#: docs/screenshots/: each shot's file and the anchor a link opens it at ("" for the first screen).
DOCS_SHOTS = {
    "report-first-screen.png": "",
    "report-table.png": "nie2023-table1",
    "report-figure.png": "nie2023-fig2a",
}


def docs_screenshots(
    report: Path = Path("results/demo/report.html"), shots: Path = Path("docs/screenshots")
) -> list[Path]:
    """``make screenshots``: docs/screenshots/*.png anew from a finished demo's ``report.html`` (a copy in a
    temporary folder: its figures are embedded, so it can move). Without the report or a Chromium it stops
    with one ``contrastlab:`` line."""
    if not report.is_file():
        raise SystemExit(
            f"contrastlab: make screenshots reads {report}, which is not there; run make demo first"
        )
    if browser() is None:
        raise SystemExit(
            "contrastlab: make screenshots needs Chromium (apt-get install chromium), and none is on PATH"
        )
    with tempfile.TemporaryDirectory() as folder:
        page = Path(shutil.copy(report, Path(folder) / "report.html"))
        return [screenshot(page, shots / name, anchor=anchor) for name, anchor in DOCS_SHOTS.items()]
