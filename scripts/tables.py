"""Snakemake entry of rule ``tables``: the paper tables and the summary page (contrastlab.tables).

Reads every metrics file under ``params.metrics_root`` (``input.metrics`` only orders the DAG and may
be empty: partial grids render with "not run" cells) and writes ``output.tables`` (CSV, Markdown and
LaTeX per table, into ``params.tables_dir``) and ``output.report``. Stderr goes to ``log[0]``.
"""

import logging
import sys
from pathlib import Path

sys.stderr = open(snakemake.log[0], "w", buffering=1)  # noqa: F821 (snakemake is injected)
handler = logging.StreamHandler(sys.stderr)
handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
log = logging.getLogger("contrastlab")
log.addHandler(handler)
log.setLevel(logging.INFO)

from contrastlab.tables import build_tables  # noqa: E402

outputs = [Path(p) for p in snakemake.output.tables]  # noqa: F821
tables_dir = Path(getattr(snakemake.params, "tables_dir", None) or outputs[0].parent)  # noqa: F821
tables = list(dict.fromkeys(p.stem for p in outputs))
written = build_tables(
    snakemake.params.metrics_root,  # noqa: F821
    dict(snakemake.params.config),  # noqa: F821
    tables_dir,
    snakemake.output.report,  # noqa: F821
    tables=tables,
)
missing = [p for p in outputs if p not in written]
if missing:
    sys.exit(f"tables: expected outputs not written: {missing}")
log.info("tables: %d metrics files in the DAG, wrote %d files", len(snakemake.input.metrics), len(written))  # noqa: F821
