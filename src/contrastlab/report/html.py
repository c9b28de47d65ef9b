"""``report.html``: the Markdown report as one self-contained page, figures embedded.

For readers who open reports in a browser (or mail them): the same content as ``report.md``, rendered by
Python-Markdown (with its ``tables`` extension), every figure the report shows inlined as a base64
``data:`` URI so the file needs nothing beside it; links to tables and CSVs stay relative (they work
when the page sits in the results folder). A short style sheet keeps wide tables readable.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from contrastlab.paths import atomic_write

__all__ = ["render_html", "write_html_report"]

_IMG = re.compile(r'<img alt="(?P<alt>[^"]*)" src="(?P<src>[^"]+\.png)"\s*/?>')

_CSS = """
body { font-family: system-ui, sans-serif; max-width: 75rem; margin: 2rem auto; padding: 0 1rem;
       line-height: 1.45; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.85rem; display: block; overflow-x: auto; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; }
th { background: #f3f3f3; }
tr:nth-child(even) td { background: #fafafa; }
img { max-width: 100%; height: auto; display: block; margin: 0.5rem 0; }
code { background: #f3f3f3; padding: 0 0.2rem; }
"""


def render_html(markdown_text: str, base_dir: str | Path, *, title: str = "contrastlab report") -> str:
    """The HTML page of ``markdown_text``, each ``![alt](path.png)`` (relative to ``base_dir``) embedded.

    A figure missing on disk keeps its relative ``src`` and gets a visible note instead of failing: the
    report is written even while some figures are still to be made.
    """
    import markdown

    body = markdown.markdown(markdown_text, extensions=["tables"], output_format="html")
    base_dir = Path(base_dir)

    def embed(match: re.Match) -> str:
        path = base_dir / html.unescape(match["src"])
        if not path.is_file():
            return f"{match[0]}<p><em>figure not found: {html.escape(str(path))}</em></p>"
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f'<img alt="{match["alt"]}" src="data:image/png;base64,{data}">'

    body = _IMG.sub(embed, body)
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
