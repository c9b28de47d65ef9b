"""Snakemake entry of rule ``tables``: the paper tables and the summary page (contrastlab.tables).

Reads every metrics file under ``params.results_dir`` (``input.metrics`` only orders the DAG and may be
empty: partial grids render with "not run" cells) and writes ``output.tables`` (CSV, Markdown and LaTeX
per table) and ``output.report`` there (contrastlab.paths.Results), the report ending with the cost of
the jobs (their benchmark files).
"""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from pathlib import Path

from contrastlab.paths import Results
from contrastlab.report import build_report
from contrastlab.workflow import sources as cl_sources
from contrastlab.workflow.job import job_label, logged_to

snakemake = globals()["snakemake"]

with logged_to(snakemake.log[0], job_label(snakemake)):
    outputs = [Path(p) for p in snakemake.output.tables]
    written = build_report(
        Results(snakemake.params.results_dir),
        cl_sources.with_locations(snakemake.params.config, snakemake.config),
        tables=list(dict.fromkeys(p.stem for p in outputs)),
        figures=[dict(f) for f in snakemake.params.figures],
    )
    missing = [p for p in outputs if p not in written]
    if missing:
        raise RuntimeError(f"tables: expected outputs not written: {missing}")
    print(f"tables: {len(snakemake.input.metrics)} metrics files in the DAG, wrote {len(written)} files")
