"""contrastlab.tables: every table from synthetic metrics files, compared with committed expected CSVs
(``CONTRASTLAB_REGEN_EXPECTED=1 pytest tests/tables`` regenerates them after an intended change)."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from tables_synthetic import SEEDS, STS, make_config, synthetic_score, write_cell, write_synthetic_metrics
from test_papers import FOUR_PAPERS

from contrastlab import config as cl_config
from contrastlab.config import Grid, MethodOn
from contrastlab.papers import paper_of
from contrastlab.paths import REPO_ROOT, Results
from contrastlab.report import build_report
from contrastlab.tables import TABLES, build_table, tables_for_config
from contrastlab.tables.assemble import param_value
from contrastlab.tables.latex import latex_escape
from contrastlab.tables.metrics import DEV_SPEARMAN, collect_metrics
from contrastlab.tables.render import fmt_param, fmt_signed
from contrastlab.tables.verdicts import cell_stratum

EXPECTED = Path(__file__).parent / "expected"
REGEN = os.environ.get("CONTRASTLAB_REGEN_EXPECTED") == "1"
#: The four papers' tables, all of which the synthetic config builds (a paper added as
#: docs/adding-a-paper.md says has no experiment in it, so no table here).
BUILT = [name for name in TABLES if paper_of(name) in FOUR_PAPERS]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, list[Path]]:
    """All tables built once from the synthetic partial grid (module scope: two shared CPU cores)."""
    root = tmp_path_factory.mktemp("tables")
    write_synthetic_metrics(root / "metrics")
    paths = build_report(Results(root), make_config())
    return root, paths


def read_csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, dtype=str, keep_default_na=False)


@pytest.mark.parametrize("name", BUILT)
def test_table_matches_expected_csv(built, name):
    root, _ = built
    got = (root / "tables" / f"{name}.csv").read_text()
    expected = EXPECTED / f"{name}.csv"
    if REGEN:
        expected.write_text(got)
    assert expected.exists(), f"no expected file {expected}; run with CONTRASTLAB_REGEN_EXPECTED=1"
    assert got == expected.read_text()


def test_each_table_is_written_as_csv_md_and_tex_and_the_report_comes_last(built):
    # How long the build took is logged by build_report ("wrote N tables in X s"), not asserted.
    root, paths = built
    names = tables_for_config(Grid(make_config()))
    assert names == BUILT and len(BUILT) == 12
    assert paths[-2:] == [root / "report.md", root / "report.html"]
    expected = {f"{n}.{e}" for n in names for e in ("csv", "md", "tex")} | {"scores.csv", "claims.csv"}
    assert {p.name for p in paths[:-2]} == expected


def test_scores_csv_holds_every_collected_score_typed(built):
    """tables/scores.csv is collect_metrics' frame, typed, with each cell's protocol and precision from the
    config and no training commit where no trainer left a log."""
    root, _ = built
    scores = pd.read_csv(root / "tables" / "scores.csv")
    metrics = collect_metrics(root / "metrics")
    assert len(scores) == len(metrics) > 0
    assert scores["score"].dtype == float and scores["seed"].dtype.kind in "fi"
    key = ["experiment", "backbone", "method", "seed", "task"]
    merged = scores.merge(metrics.astype({"seed": float}), on=key, suffixes=("", "_collected"))
    assert len(merged) == len(metrics)
    assert np.array_equal(merged["score"], merged["score_collected"], equal_nan=True)
    cl = scores[(scores.experiment == "nie2023") & (scores.method == "cl")].iloc[0]
    protocol, _, precision = cell_stratum(Grid(make_config()), "nie2023", cl.backbone, "cl").partition("/")
    assert cl.precision == precision and (cl.protocol == protocol if protocol else pd.isna(cl.protocol))
    assert scores["trained_commit"].isna().all()


def test_no_blank_or_zero_cells(built):
    root, _ = built
    for name in BUILT:
        frame = read_csv(root / "tables" / f"{name}.csv")
        # a number cell is empty only where the status says why (not run, not configured, ...)
        numbers = [c for c in ("ours_mean", "config") if c in frame]
        text = [
            c
            for c in ("backbone", "method", "task", "param", "status", "verdict", "compared_with")
            if c in frame
        ]
        assert (frame[text] != "").all().all(), f"{name} has blank cells"
        for column in numbers:
            assert not frame[column].isin(["0", "0.00", "nan", "NaN"]).any()
            blank = frame[frame[column] == ""]
            assert set(blank.status) <= {"not run", "not configured", "failed", "diverged"}, name
        md = (root / "tables" / f"{name}.md").read_text()
        assert "|  |  |  |" not in md.replace("|  |  | paper", "").replace("|  |  | ours", "")


def test_not_run_marker_shows_published(tmp_path):
    """No metrics at all: every cell in the grid says "not run" next to the published number."""
    config = make_config()
    build_report(Results(tmp_path), config)
    frame = read_csv(tmp_path / "tables" / "nie2023_table1.csv")
    cl = frame[(frame.method == "cl") & (frame.backbone == "bert-base") & (frame.task == "sts_avg")].iloc[0]
    assert (cl.published, cl.ours_mean, cl["diff"], cl.status) == ("76.04", "", "", "not run")
    # bert-large is not in this config's grid: its number cells empty, its status says why.
    large = frame[(frame.method == "cl") & (frame.backbone == "bert-large")]
    assert set(large.status) == {"not configured"} and set(large.ours_mean) == {""}
    # every number column reads as numbers, the published one included
    typed = pd.read_csv(tmp_path / "tables" / "nie2023_table1.csv")
    for column in ("published", "ours_mean", "ours_std", "diff", "noise_std", "half_width"):
        assert typed[column].dtype == float, column
    md = (tmp_path / "tables" / "nie2023_table1.md").read_text()
    assert "| L_cl | paper | 76.04 | 86.38 |" in md
    assert "|  | ours | not run | not run |" in md


def test_partial_grid(built):
    root, _ = built
    frame = read_csv(root / "tables" / "nie2023_table1.csv").set_index(["backbone", "method", "task"])
    partial = frame.loc[("roberta-base", "cl", "sts_avg")]
    assert (partial.status, partial.n_seeds) == ("partial", "2")
    md = (root / "tables" / "nie2023_table1.md").read_text()
    assert "(n=2/3)" in md
    # seed 45 is not in the config's seeds: ignored.
    assert frame.loc[("bert-base", "mpt", "sts_avg")].n_seeds == "3"
    # mmhs ran with STS tasks only: its transfer cells are "not run", its STS cells are filled.
    t3 = read_csv(root / "tables" / "li2024_table3.csv").set_index(["backbone", "method", "task"])
    t4 = read_csv(root / "tables" / "li2024_table4.csv").set_index(["backbone", "method", "task"])
    assert t3.loc[("bert-base", "mmhs", "STS12")].status == "ok"
    assert t4.loc[("bert-base", "mmhs", "MR")].status == "not run"
    assert t4.loc[("bert-base", "mmhs", "tr_avg")].ours_mean == ""


def test_mean_std_and_difference(tmp_path):
    config = make_config()
    write_cell(tmp_path, "li2024", "bert-base", "mmhe")
    write_cell(tmp_path, "li2024", "bert-base", "mhe")
    table = build_table("li2024_table3", Grid(config), tmp_path)
    cell = table.cells.set_index(["backbone", "method", "key"]).loc[("bert-base", "mmhe", "STS12")]
    ours = np.array([synthetic_score("li2024", "bert-base", "mmhe", s, "STS12") for s in SEEDS])
    base = np.array([synthetic_score("li2024", "bert-base", "mhe", s, "STS12") for s in SEEDS])
    assert cell.ours_mean == pytest.approx(ours.mean())
    assert cell.ours_std == pytest.approx(ours.std(ddof=1))
    assert cell["diff"] == pytest.approx(ours.mean() - 71.48)
    assert cell.ours_improvement == pytest.approx(ours.mean() - base.mean())
    assert cell.published_improvement == pytest.approx(18.2)


def test_toy_backbones_render_with_na(built):
    root, _ = built
    frame = read_csv(root / "tables" / "li2024_table3.csv")
    toy = frame[frame.backbone == "minilm"]
    assert len(toy) == 8 * 8 and set(toy.published) == {""}
    mmhe = toy[(toy.method == "mmhe") & (toy.task == "STS12")].iloc[0]
    assert mmhe.status == "ok" and mmhe["diff"] == ""
    # A backbone of another table of the same experiment is not a toy row: macl_table3 is RoBERTa-only.
    assert set(read_csv(root / "tables" / "macl_table3.csv").backbone) == {"roberta-base"}


def test_hyperparameter_tables(built):
    root, _ = built
    t2 = read_csv(root / "tables" / "nie2023_table2.csv").set_index(["backbone", "method", "param"])
    assert t2.loc[("bert-base", "cl", "tau")].status == "match"
    mpt = t2.loc[("bert-base", "mpt", "m")]
    assert mpt[["published", "config", "status"]].tolist() == ["0.23", "0.25", "differs"]
    mat = t2.loc[("roberta-base", "mat", "m")]
    assert mat[["published", "config", "status"]].tolist() == ["0.14π", "0.14π", "match"]
    assert t2.loc[("bert-large", "cl", "tau")].status == "not configured"  # not in this config's backbones
    assert t2.loc[("bert-base", "met", "m")].config == ""  # its status: not configured
    md = (root / "tables" / "nie2023_table2.md").read_text()
    assert "0.15π" in md and "0.25 ≠" in md
    t7 = read_csv(root / "tables" / "li2024_table7.csv").set_index(["backbone", "method", "param"])
    assert t7.loc[("roberta-base", "mmhs", "tau")].published == "n/a"


def test_report_lists_every_table(built):
    root, paths = built
    report = (root / "report.md").read_text()
    for name in BUILT:
        assert f"(tables/{name}.md)" in report and f"(tables/{name}.tex)" in report
    for link in re.findall(r"\]\(([^)]+)\)", report):
        assert (root / link).exists(), link


def test_repository_configs_render(tmp_path):
    """config.yaml (full grid) and the demo preset: every table renders; the full config's
    hyperparameters equal the papers' Tables 2, 6 and 7."""
    full = cl_config.load(REPO_ROOT / "config.yaml")
    build_report(Results(tmp_path / "full"), full)
    for name in ("nie2023_table2", "li2024_table6", "li2024_table7"):
        status = read_csv(tmp_path / "full" / "tables" / f"{name}.csv").status
        assert set(status) <= {"match", "not in paper"}, f"{name}: {status.value_counts().to_dict()}"
    demo = cl_config.load(REPO_ROOT / "config" / "demo.yaml")
    paths = build_report(Results(tmp_path / "demo"), demo)
    # + the two search tables (the demo runs its searches with everything), report.md and report.html
    # ... and tables/scores.csv and tables/claims.csv
    assert len(paths) == 3 * (len(tables_for_config(Grid(demo))) + 2) + 4
    table1 = read_csv(tmp_path / "demo" / "tables" / "nie2023_table1.csv")
    assert "tiny-bert" in table1.backbone.tolist()
    # the MPT search's winner: an "(ours, searched)" row beside the published numbers, not run yet
    searched = table1[table1.method == "mpt~searched"]
    assert set(searched.status) == {"not run", "not configured"}, searched.status.value_counts()
    assert set(searched[searched.status == "not run"].backbone) == {"tiny-bert"}
    mpt = table1[table1.method == "mpt"].set_index(["backbone", "task"]).published
    assert searched.set_index(["backbone", "task"]).published.equals(mpt)


def test_collect_metrics_frame_with_the_training_dev_score(tmp_path):
    """One row per score; the metrics file's ``training`` block carries the kept checkpoint's STS-B dev
    Spearman (Li Fig. 6's measure): a task of its own, absent where the block has none (the pretrained
    rows, older files)."""
    write_cell(tmp_path, "macl", "bert-base", "macl", seeds=[42], tasks=STS)
    frame = collect_metrics(tmp_path)
    assert list(frame.columns) == ["experiment", "backbone", "method", "seed", "task", "score"]
    assert set(frame.task) == set(STS) | {"sts_avg"}  # tr_avg is null: the transfer group did not run
    assert collect_metrics(tmp_path / "missing").empty
    write_cell(tmp_path, "li2024_fig6_m", "bert-base", "baseline-m0.3", seeds=[42], tasks=STS)
    path = tmp_path / "li2024_fig6_m" / "bert-base" / "baseline-m0.3" / "seed42" / "senteval.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "training": {"best_step": 250, DEV_SPEARMAN: 81.25}}))
    write_cell(tmp_path, "li2024_fig6_m", "bert-base", "baseline-m1.0", seeds=[42], tasks=STS)
    frame = collect_metrics(tmp_path)
    dev = frame[frame.task == DEV_SPEARMAN]
    assert dev[["method", "score"]].values.tolist() == [["baseline-m0.3", 81.25]]


def test_formatting():
    assert fmt_signed(0.2449) == "+0.24" and fmt_signed(-1.5) == "-1.50" and fmt_signed(-0.001) == "+0.00"
    assert fmt_signed(18.24, 1) == "+18.2"
    assert [fmt_param(v, "sci") for v in (1e-5, 7e-6, 0.05)] == ["1e-5", "7e-6", "5e-2"]
    shown = [fmt_param(0.15, "2f", "pi"), fmt_param(128, "int"), fmt_param(0.1, "g")]
    assert shown == ["0.15π", "128", "0.1"]
    assert latex_escape("L_a&u -0.24 ± 1e-5") == r"L\_a\&u $-$0.24 $\pm$ 1e-5"


def test_latex_structure(built):
    root, _ = built
    for name in BUILT:
        tex = (root / "tables" / f"{name}.tex").read_text()
        assert tex.count("\\begin{tabular}") == tex.count("\\end{tabular}") == 1
        assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex
        n_cols = len(re.search(r"\\begin\{tabular\}\{([lrc]+)\}", tex)[1])
        body = tex.split("\\toprule", 1)[1].split("\\bottomrule", 1)[0]
        for line in body.splitlines():
            if line.endswith("\\\\"):
                spans = sum(int(k) - 1 for k in re.findall(r"\\multicolumn\{(\d+)\}", line))
                assert line.count(" & ") + 1 + spans == n_cols, (name, line)


def test_snakemake_script(tmp_path, monkeypatch):
    """scripts/tables.py with a stand-in ``snakemake`` object: writes the declared outputs and logs."""
    write_synthetic_metrics(tmp_path / "metrics")
    config = make_config()
    names = tables_for_config(Grid(config))
    outputs = [str(tmp_path / "tables" / f"{n}.{e}") for n in names for e in ("csv", "md", "tex")]
    snakemake = SimpleNamespace(
        input=SimpleNamespace(metrics=[]),
        output=SimpleNamespace(
            tables=outputs, report=str(tmp_path / "report.md"), report_html=str(tmp_path / "report.html")
        ),
        params=SimpleNamespace(config=config, results_dir=str(tmp_path), figures=[]),
        log=[str(tmp_path / "tables.log")],
        config=config,  # the run's whole config: the script takes the data's locations from it
    )
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # the script redirects stderr; restored after
    logger = logging.getLogger("contrastlab")
    handlers = list(logger.handlers)
    try:
        runpy.run_path(str(REPO_ROOT / "scripts" / "tables.py"), init_globals={"snakemake": snakemake})
    finally:
        for handler in set(logger.handlers) - set(handlers):
            logger.removeHandler(handler)
        if not isinstance(sys.stderr, io.StringIO):
            sys.stderr.close()
    assert all(Path(p).exists() for p in outputs) and (tmp_path / "report.md").exists()
    assert (tmp_path / "report.html").exists()
    assert "wrote" in (tmp_path / "tables.log").read_text()
    assert len((REPO_ROOT / "scripts" / "tables.py").read_text().splitlines()) < 60


def test_settings_resolution_for_the_tables():
    """defaults <- experiment <- method <- per_backbone, and which loss values are catalog defaults."""
    grid = Grid(make_config())
    mat = MethodOn("nie2023", "roberta-base", "mat")
    flat = grid.settings(mat)
    assert [flat[k] for k in ("lr", "batch_size", "loss_hp", "max_length")] == [7e-6, 128, {"m": 0.14}, 32]
    explicit = grid.experiment(mat.experiment).explicit_hp(mat.method, mat.backbone)
    assert param_value(flat, explicit, "m") == (0.14, False)
    assert param_value(flat, explicit, "lr") == (7e-6, False)
    mmhe = MethodOn("li2024", "roberta-base", "mmhe")
    li = grid.settings(mmhe)
    assert li["precision"] == "fp32" and li["batch_size"] == 512
    assert {k: li["loss_hp"][k] for k in ("m", "tau", "r")} == {"m": 0.30, "tau": 0.05, "r": 1.25}
    stated = grid.experiment(mmhe.experiment).explicit_hp(mmhe.method, mmhe.backbone)
    assert param_value(li, stated, "r") == (1.25, False)
    assert param_value(li, stated, "lam") == (1.0, True)  # not in the config: the loss's default
    with pytest.raises(KeyError):
        grid.settings(MethodOn("nie2023", "bert-base", "not-a-method"))
