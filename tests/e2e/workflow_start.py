"""The checks the Snakefile makes while it is read (rules/common.smk), run in this process.

Every config error and every damaged user copy of the SentEval data stops the workflow with one
``contrastlab: ...`` line before any job. Starting Snakemake to see that line costs seconds per case; the
line comes from library calls that are cheap. :func:`start_error` makes those calls, in the Snakefile's
order, on the config Snakemake would hand the Snakefile (the ``--configfile`` read as YAML, the
``--config`` entries parsed by Snakemake's own ``parse_config`` and merged by its ``update_config``).
One test per kind of error still starts Snakemake (test_failures.py), proving the line, the exit status
1 and the absent traceback end to end.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from snakemake.cli import parse_config
from snakemake.utils import update_config

from contrastlab import config as cl_config
from contrastlab.artifacts import LockMismatch
from contrastlab.cost import budget as cl_budget
from contrastlab.data.corpus_check import CorpusError
from contrastlab.senteval.tasks import SentEvalDataError


def snakemake_config(configfile: str | Path, *overrides: str) -> dict:
    """The ``config`` Snakemake hands the Snakefile for ``--configfile configfile --config *overrides``."""
    with open(configfile) as handle:
        config = yaml.safe_load(handle) or {}
    update_config(config, parse_config(list(overrides)))
    return config


def start_error(configfile: str | Path, *overrides: str) -> str | None:
    """The one ``contrastlab:`` line with which reading the Snakefile stops, or None when it would not: the
    checks at the top of rules/common.smk, in its order."""
    try:
        config = cl_config.validate(snakemake_config(configfile, *overrides))
    except cl_config.ConfigError as error:
        return f"contrastlab: {error}"
    try:
        grid = cl_config.Grid(config)
        cl_budget.searched_points(grid)
    except (cl_config.ConfigError, ValueError) as error:
        return f"contrastlab: {error}"
    for what in ("senteval", "corpus"):
        try:
            grid.data.identity(what)
        except (OSError, SentEvalDataError, CorpusError, LockMismatch) as error:
            return f"contrastlab: data: {type(error).__name__}: {' '.join(str(error).split())}"
    try:
        grid.data.check_lock()
    except LockMismatch as error:
        return f"contrastlab: {' '.join(str(error).split())}"
    return None
