"""The bridge table: per checkpoint and STS task, the SentEval-protocol score, MTEB's, and the difference
split into its causes (:mod:`contrastlab.evaluation.bridge`), with sentence-transformers' evaluator on
STS-B beside them; read from every ``bridge.json`` under the results' ``mteb/`` folder (rule ``mteb``)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from contrastlab.blocks import Heading, Paragraph, rows_table, to_markdown
from contrastlab.evaluation.bridge import BRIDGE_FILE, PROVENANCE_FILE, STEPS
from contrastlab.evaluation.mteb_sts import MTEB_TASKS
from contrastlab.paths import Results, write_text

__all__ = ["BRIDGE_TABLE", "bridge_blocks", "bridge_rows", "write_bridge_table"]

BRIDGE_TABLE = "bridge"
#: Column headers of the steps, in the chain's order.
STEP_HEADERS = {
    "text_form": "text form",
    "pooling": "pooling",
    "pairs": "pairs present",
    "split": "split",
    "similarity": "similarity/correlation",
}


def bridge_rows(results: Results) -> list[dict[str, str]]:
    """One row per (checkpoint, task) of every finished ``bridge.json``, scores in percent to 2 decimals,
    the parts to 3 (``sum`` = the parts added up, equal to ``MTEB - SentEval``)."""
    root = Path(results.mteb())
    rows = []
    for path in sorted(root.rglob(BRIDGE_FILE)):
        place = path.parent.relative_to(root).as_posix()
        found = json.loads(path.read_text(encoding="utf-8"))
        provenance = path.parent / PROVENANCE_FILE
        made = json.loads(provenance.read_text(encoding="utf-8")) if provenance.exists() else {}
        st = found.get("sentence_transformers", {})
        for task in [t for t in MTEB_TASKS if t in found["tasks"]]:  # SentEval's order
            r = found["tasks"][task]
            rows.append(
                {
                    "checkpoint": place,
                    "task": task,
                    "MTEB data": made.get("data", "?"),
                    "SentEval": f"{r['senteval']:.2f}",
                    **{STEP_HEADERS[s]: f"{r['parts'][s]:+.3f}" for s in STEPS},
                    "MTEB": f"{r['mteb']:.2f}",
                    "MTEB - SentEval": f"{r['total']:+.3f}",
                    "sum of parts": f"{sum(r['parts'].values()):+.3f}",
                    "ST evaluator": f"{st[task]:.2f}" if task in st else "",
                }
            )
    return rows


def write_bridge_table(rows: list[dict[str, str]], out_dir: str | Path) -> list[Path]:
    """``bridge.csv`` and ``bridge.md`` of :func:`bridge_rows`' ``rows`` in ``out_dir``; nothing without
    rows (no checkpoint has a ``bridge.json``: ``mteb.enabled`` off)."""
    if not rows:
        return []
    out_dir = Path(out_dir)  # write_text makes the folder
    csv_path, md_path = out_dir / f"{BRIDGE_TABLE}.csv", out_dir / f"{BRIDGE_TABLE}.md"
    write_text(csv_path, pd.DataFrame(rows).to_csv(index=False, lineterminator="\n"))
    write_text(
        md_path, to_markdown([Heading(1, "SentEval protocol -> MTEB, step by step"), rows_table(rows, 3)])
    )
    return [csv_path, md_path]


BRIDGE_TITLE = "SentEval protocol and MTEB on the same checkpoints"
BRIDGE_TEXT = (
    "Each kept sentence checkpoint scored by the SentEval protocol (the papers' numbers) and by MTEB's "
    "own evaluator (the mteb package), with the difference split into its causes, one change at a "
    "time: text form (SentEval's tokenised, lowercased text -> MTEB's copy), pooling (SentEval's "
    "'all' -> MTEB's single set), pairs present, split, and similarity/correlation (our cosine "
    "Spearman -> MTEB's evaluator). The parts add up to MTEB - SentEval. ST evaluator: "
    "sentence-transformers' EmbeddingSimilarityEvaluator on MTEB's STS-B rows (MTEB's score: same "
    "rows, same cosine Spearman; they part only where a pair holds two identical sentences, whose "
    "float32 cosines each rounds its own way, as in the demo's fixture). MTEB data 'standin': "
    "MTEB-format sets built from local files, not the hub's; see docs/bridge.md. Files: "
    "`tables/bridge.md`, `tables/bridge.csv`; MTEB's own results: `mteb/<cell>/results/`."
)


def bridge_blocks(rows: list[dict[str, str]], level: int = 2) -> list:
    """The report's section of the bridge ``rows`` (:func:`bridge_rows`): its heading at ``level`` (2 on
    its own, 3 under its paper's section), what the columns mean, the table (numbers right-aligned)."""
    return [Heading(level, BRIDGE_TITLE), Paragraph(BRIDGE_TEXT), rows_table(rows, right=3)]
