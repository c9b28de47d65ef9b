"""Check the transcribed numbers against the paper text, row by row and in column order.

Each sidecar's ``transcription`` block says where the table starts and ends in the paper file and, in
paper order, which line holds which cells: ``line`` (a regex searched forward from the previous match;
``section`` only moves the cursor) or ``column`` (a column printed one cell per line, OAR Table 4), the
fixed keys and ``vary`` (keys whose product lists the line's cells left to right). Cells parse as
numbers (``0.15\\pi``, ``1e-5``), ``-`` or ``-*`` (not reported); an improvement beside a value (Li:
``71.48+18.2``; MACL: ``67.16 (-1.24)``) is checked against the ``improvement`` column; ``scale``
multiplies every paper number first (OAR prints fractions).
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pandas as pd

from contrastlab.tables.published import get_spec, load_meta, load_published

_CELL = re.compile(
    r"(?P<na>-\*?)(?=\s|$)"
    r"|(?P<val>\d+(?:\.\d+)?(?:e-\d+)?)(?P<pi>\s*(?:\\pi|π))?"
    r"(?:(?P<imp>[+-]\s?\d+\.\d+)|\s*\((?P<imp2>[+-]\d+\.\d+)\))?"
)
_TAG = re.compile(r"</?[a-z]+>")  # HTML emphasis (<b>best</b>) in the Markdown papers
_IMPROVEMENT = re.compile(r"\(([+-]\d+\.\d+)\)")


def parse_cells(text: str) -> list[tuple[float | None, float | None, str]]:
    """Cells of one table line (label already removed): ``(value, improvement, mark)``, value None
    for "-"; mark is "*" for "-*", "pi" for a value in units of pi, else "". HTML tags are ignored."""
    cells = []
    for m in _CELL.finditer(_TAG.sub("", text)):
        if m["na"]:
            cells.append((None, None, "*" if m["na"].endswith("*") else ""))
            continue
        imp = m["imp"] or m["imp2"]
        cells.append((float(m["val"]), float(imp.replace(" ", "")) if imp else None, "pi" if m["pi"] else ""))
    return cells


def _find(lines: list[str], pattern: str, start: int, stop: int) -> int:
    rx = re.compile(pattern)
    for i in range(start, stop):
        if rx.search(lines[i]):
            return i
    raise LookupError(f"no line matching {pattern!r} in lines {start + 1}..{stop}")


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def verify_transcription(name: str, papers_dir: Path, published: pd.DataFrame | None = None) -> list[str]:
    """Problems found comparing table ``name``'s transcription with the paper text (empty: all good):
    every published cell must match exactly one position in the table's text. ``published`` replaces the
    packaged transcription (to test this check itself)."""
    spec = get_spec(name)
    meta = load_meta(name)
    tx = meta["transcription"]
    lines = (Path(papers_dir) / meta["paper"]["file"]).read_text(encoding="utf-8").splitlines()
    pub = (load_published(name) if published is None else published).set_index(["backbone", "method", "key"])
    key_name = "param" if spec.kind == "hparams" else "task"
    problems: list[str] = []

    cursor = 0
    for pattern in [tx["start"]] if isinstance(tx["start"], str) else tx["start"]:
        cursor = _find(lines, pattern, cursor, len(lines))
    end = _find(lines, tx["end"], cursor, len(lines))
    seen: set[tuple[str, str, str]] = set()
    scale = float(tx.get("scale", 1))
    for row in tx["rows"]:
        if "section" in row:
            cursor = _find(lines, row["section"], cursor, end) + 1
            continue
        vary = row["vary"]
        fixed = {"backbone": row.get("backbone"), "method": row.get("method"), key_name: row.get(key_name)}
        combos = (fixed | dict(zip(vary, combo, strict=True)) for combo in itertools.product(*vary.values()))
        keys = [(k["backbone"], k["method"], k[key_name]) for k in combos]
        if "column" in row:
            i = _find(lines, row["column"], cursor, end)
            below = [j for j in range(i + 1, end) if lines[j].strip()][: len(keys)]
            cells = [c for j in below for c in parse_cells(lines[j])]
            if any(len(parse_cells(lines[j])) != 1 for j in below):
                problems.append(f"line {i + 1}: the column's lines do not hold one number each")
                continue
            cursor = (below[-1] if below else i) + 1
        else:
            i = _find(lines, row["line"], cursor, end)
            cursor = i + 1
            match = re.search(row["line"], lines[i])
            cells = parse_cells(lines[i][match.end() :])
        if scale != 1:
            cells = [(None if v is None else round(v * scale, 10), imp, mark) for v, imp, mark in cells]
        if row.get("improvement_next_line"):
            imps = [float(x) for x in _IMPROVEMENT.findall(lines[i + 1])]
            cursor = i + 2
            values = [c for c in cells if c[0] is not None]
            if len(imps) != len(values):
                problems.append(f"line {i + 2}: {len(imps)} improvements for {len(values)} values")
            cells = [(v, imp, mark) for (v, _, mark), imp in zip(cells, imps, strict=False)]
        if len(cells) != len(keys):
            problems.append(f"line {i + 1}: {len(cells)} cells in the paper, {len(keys)} transcribed: {keys}")
            continue
        for key, (value, imp, mark) in zip(keys, cells, strict=True):
            where = f"{name} {key} (paper line {i + 1})"
            if key not in pub.index:
                problems.append(f"{where}: missing from the transcription")
                continue
            seen.add(key)
            rec = pub.loc[key]
            ours_value = None if math.isnan(rec["value"]) else float(rec["value"])
            ours_imp = None if math.isnan(rec["improvement"]) else float(rec["improvement"])
            if not _same(ours_value, value):
                problems.append(f"{where}: transcribed {ours_value}, paper {value}")
            if not _same(ours_imp, imp):
                problems.append(f"{where}: improvement transcribed {ours_imp}, paper {imp}")
            paper_mark = "" if mark == "pi" else mark
            if (rec["unit"] == "pi") != (mark == "pi") or (rec["mark"] or "") != paper_mark:
                problems.append(
                    f"{where}: unit/mark transcribed {rec['unit']!r}/{rec['mark']!r}, paper {mark!r}"
                )
    if unchecked := sorted(set(pub.index) - seen):
        problems.append(f"{name}: transcribed cells not located in the paper: {unchecked}")
    return problems
