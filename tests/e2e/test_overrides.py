"""Command-line overrides mean what they mean in a config file, through Snakemake itself (the coercion
itself is tests/config/test_schema.py's)."""

from __future__ import annotations

import re

from .conftest import demo_process, succeeded

SCHEDULE_FIRST = 1  # a long module: tests/conftest.py starts the highest numbers first


def test_documented_overrides_work_through_snakemake(repo_root, tmp_path):
    """The README's overrides, numbers and booleans given on the command line, through Snakemake itself."""
    done = demo_process(
        repo_root,
        tmp_path,
        "training={batch_size: 32, lr: 0.0001}",
        "tables={partial: true}",
        "select={experiments: [nie2023], seeds: [42]}",
        "precision_override=bf16",
        "--printshellcmds",
    )
    out = succeeded(done)
    assert "contrastlab:" not in out
    # tables.partial renders the report from what exists: the tables and the figures, nothing trains
    assert re.search(r"^tables\s+1$", out, re.M), out[-2000:]
    assert not re.search(r"^(train|encode|evaluate)\s", out, re.M), out[-2000:]
    done = demo_process(repo_root, tmp_path, "training={batch_size: 32, lr: 0.0001}", "select={seeds: [42]}")
    # The demo's 5 sentence cells of the tables, 8 of the figure sweeps (Nie Fig. 3, Li Fig. 6), 2 of
    # Li's conjecture runs (Fig. 5, 7-9) and the 6 search points that are not configured cells.
    assert done.returncode == 0 and re.search(r"^train\s+21$", done.stdout + done.stderr, re.M)
