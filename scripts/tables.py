"""Snakemake entry of rule ``tables``: the paper tables and the summary page (contrastlab.tables).

Reads every metrics file under ``params.metrics_root`` (``input.metrics`` only orders the DAG and may
be empty: partial grids render with "not run" cells) and writes ``output.tables`` (CSV, Markdown and
LaTeX per table, into ``params.tables_dir``) and ``output.report``, which ends with the cost of the jobs
under ``params.results_dir`` (their benchmark files).
"""

from pathlib import Path

from contrastlab.report import build_report
from contrastlab.workflow.job import job_label, logged_to

snakemake = globals()["snakemake"]

with logged_to(snakemake.log[0], job_label(snakemake)):
    outputs = [Path(p) for p in snakemake.output.tables]
    written = build_report(
        snakemake.params.metrics_root,
        dict(snakemake.params.config),
        snakemake.params.tables_dir,
        snakemake.output.report,
        tables=list(dict.fromkeys(p.stem for p in outputs)),
        figures=[dict(f) for f in snakemake.params.figures],
        results_dir=getattr(snakemake.params, "results_dir", None),  # no cost section without it
    )
    missing = [p for p in outputs if p not in written]
    if missing:
        raise RuntimeError(f"tables: expected outputs not written: {missing}")
    print(f"tables: {len(snakemake.input.metrics)} metrics files in the DAG, wrote {len(written)} files")
