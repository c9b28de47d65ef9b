"""The run's page: every table the config produces (:mod:`contrastlab.tables`), written as CSV, Markdown
and LaTeX, and the report beside them, one document that ``sections`` builds, ``document`` renders as
Markdown and ``html`` as report.html; ``claims`` checks each paper's headline claims against our metrics
(``docs/claims.md``). Publishing a checkpoint on the Hub is :mod:`contrastlab.hub`'s.

Example (no runs yet: every cell shows the published number and "not run")::

    >>> import tempfile, pathlib
    >>> from contrastlab.paths import Results
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> config = {"seeds": [42], "experiments": {"macl": {"backbones": ["bert-base"], "methods": {}}}}
    >>> [p.name for p in build_report(Results(d), config)][:3]
    ['macl_table3.csv', 'macl_table3.md', 'macl_table3.tex']
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from contrastlab.blocks import literals_of
from contrastlab.config import Grid
from contrastlab.paths import Results, write_text
from contrastlab.tables import get_spec, tables_for_config
from contrastlab.tables.search import search_tables, write_search_tables

if TYPE_CHECKING:
    from contrastlab.tables.assemble import Table

__all__ = ["build_report"]

log = logging.getLogger(__name__)


def build_report(
    results: Results, config: dict, tables: list[str] | None = None, figures: list[dict] | None = None
) -> list[Path]:
    """Write every table (default: :func:`tables_for_config`, comparisons and searches) as CSV, Markdown and
    LaTeX into ``results.tables``, then ``results.report`` and report.html, from whatever metrics exist
    under ``results.metrics()``; returns the written paths, the two reports last."""
    # pandas: loaded only when the report is built, so `import contrastlab.report` stays light
    from contrastlab.report.claims import evaluate_claims
    from contrastlab.report.compare import write_claims
    from contrastlab.report.scores import write_scores
    from contrastlab.report.sections import write_report
    from contrastlab.tables.bridge import bridge_rows, write_bridge_table
    from contrastlab.tables.comparison import write_comparisons
    from contrastlab.tables.metrics import collect_failures, collect_metrics

    t0 = time.perf_counter()
    # the report's one grid: every table, claim and section reads its cells, and every file it reads
    # (metrics, the figures' numbers that claims read, logs) lies under ``results``, whatever folder the
    # config names: a report rendered elsewhere never reads the config's own results folder
    grid = Grid({**config, "results_dir": results.root})
    metrics_root = results.metrics()
    names, comparisons, search_names = _table_names(grid, tables)
    metrics = collect_metrics(metrics_root)
    failures = collect_failures(metrics_root)
    log.info("collected %d scores from %s", len(metrics), metrics_root)
    out_dir = Path(results.tables)
    out_dir.mkdir(parents=True, exist_ok=True)
    built = _write_tables(names, grid, metrics, failures, out_dir)
    written: list[Path] = [path for _, paths in built for path in paths.values()]
    # beside the paper tables: the scores as data (report.scores) and each claim's verdict, what
    # `make compare` reads (report.compare), the comparison tables of the user's losses, the searches'
    # selections and the SentEval-MTEB bridge
    claims = evaluate_claims(metrics, grid)  # the report's claims sections read them too
    written += [write_scores(metrics, grid, results.root, out_dir), write_claims(claims, out_dir)]
    compare_paths, compare_blocks = write_comparisons(grid, metrics, out_dir, comparisons, failures)
    search_paths, search_blocks = write_search_tables(grid, results.root, out_dir, search_names, metrics)
    bridge = bridge_rows(results)  # when rule mteb ran (mteb.enabled); shown under each checkpoint's paper
    written += [*compare_paths, *search_paths, *write_bridge_table(bridge, out_dir)]
    report = write_report(
        built,
        Path(results.report),
        metrics_root=metrics_root,
        grid=grid,
        figures=figures,
        results_dir=results.root,
        sections=compare_blocks,
        bridge=bridge,
        searches=search_blocks,
        metrics=metrics,
        claims=claims,
    )
    log.info("wrote %d tables in %.2fs", len(built), time.perf_counter() - t0)
    return [*written, report, report.with_suffix(".html")]  # report.html: figures embedded


def _table_names(grid: Grid, tables: list[str] | None) -> tuple[list[str], list[str], list[str]]:
    """The paper tables, the comparison tables of the user's losses and the searches' tables to write:
    ``tables`` split by kind (None: every table the config produces), each paper table's name checked."""
    from contrastlab.tables.comparison import comparison_tables

    names = tables_for_config(grid) if tables is None else list(tables)
    compared = comparison_tables(grid)
    comparisons = [name for name in names if name in compared] if tables is not None else compared
    searched = search_tables(grid)
    search_names = [name for name in names if name in searched] if tables is not None else searched
    names = [name for name in names if name not in compared and name not in searched]
    for name in names:
        get_spec(name)
    return names, comparisons, search_names


def _write_tables(names: list[str], grid: Grid, metrics, failures, out_dir: Path) -> list[tuple[Table, dict]]:
    """Assemble each paper table and write it as CSV, Markdown and LaTeX into ``out_dir``: (table,
    {ext: path}) per table."""
    from contrastlab.tables.assemble import assemble
    from contrastlab.tables.render import to_csv, to_latex, to_markdown

    built, literals = [], literals_of(grid.config)  # the config's names are text on the page
    for name in names:
        table = assemble(get_spec(name), grid, metrics, failures)
        paths = {ext: out_dir / f"{name}.{ext}" for ext in ("csv", "md", "tex")}
        write_text(paths["csv"], to_csv(table))  # atomically: a full disk leaves the previous file
        write_text(paths["md"], to_markdown(table, literals=literals))
        write_text(paths["tex"], to_latex(table))
        built.append((table, paths))
    return built
