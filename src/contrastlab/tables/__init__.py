"""Paper tables with the published numbers beside ours (protocol.md §5).

:func:`build_table` assembles one table the config produces (:data:`TABLES`, :func:`tables_for_config`)
from every metrics file under a folder; :func:`contrastlab.report.build_report` writes them all with the
run's report. The published numbers are transcribed in ``published/`` (one CSV + YAML source
note per table) and checked against the paper text by :func:`~.verify.verify_transcription`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from contrastlab.tables.published import TABLES, TableSpec, get_spec, load_published

if TYPE_CHECKING:
    from contrastlab.config import Grid
    from contrastlab.tables.assemble import Table

__all__ = ["TABLES", "TableSpec", "build_table", "load_published", "tables_for_config"]


def tables_for_config(grid: Grid) -> list[str]:
    """Names of the tables a config produces: those of its selected experiments, in registry order."""
    return [name for name, spec in TABLES.items() if spec.experiment in grid.experiments]


def build_table(name: str, grid: Grid, metrics_root: str | Path) -> Table:
    """Assemble one table (not written); see :func:`contrastlab.report.build_report`."""
    # pandas is slow to load: imported here, where a table is built, not by the workflow's parse
    from contrastlab.tables.assemble import assemble
    from contrastlab.tables.metrics import collect_failures, collect_metrics

    return assemble(get_spec(name), grid, collect_metrics(metrics_root), collect_failures(metrics_root))
