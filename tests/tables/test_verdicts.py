"""Seed-noise verdicts (contrastlab.tables.verdicts): the pooled noise by hand, the interval's edge, and
the verdicts on constructed metrics in the CSV, Markdown and report."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from contrastlab import config as cl_config
from contrastlab.config import Grid
from contrastlab.paths import REPO_ROOT, Results
from contrastlab.report import build_report
from contrastlab.report.claims import NOT_RUN, all_claims, evaluate_claim, evaluate_claims
from contrastlab.stats import half_width
from contrastlab.tables import TABLES, get_spec
from contrastlab.tables.assemble import assemble
from contrastlab.tables.published import load_meta
from contrastlab.tables.render import to_csv, to_latex, to_markdown
from contrastlab.tables.verdicts import (
    ABOVE,
    BELOW,
    NO_PUBLISHED,
    UNDECIDED,
    WITHIN,
    cell_stratum,
    cell_verdict,
    chance_expected,
    chance_text,
    noise_pools,
    published_runs,
    runs_assumed,
    runs_text,
)
from tests.tables.tables_synthetic import scores_frame as frame
from tests.tables.tables_synthetic import write_scores
from tests.test_stats import T975  # Student t quantiles from a printed table (not from scipy)


def test_a_cell_exactly_at_the_edge_is_within_noise():
    h = half_width(math.sqrt(4 / 3), 3, n=3, k=1)
    assert cell_verdict(h, h, 3) == WITHIN
    assert cell_verdict(-h, h, 3) == WITHIN
    assert cell_verdict(np.nextafter(h, math.inf), h, 3) == ABOVE
    assert cell_verdict(-np.nextafter(h, math.inf), h, 3) == BELOW
    assert cell_verdict(0.0, math.nan, 0) == UNDECIDED
    assert cell_verdict(math.nan, h, 3) == NO_PUBLISHED


def test_k_is_stated_or_assumed_per_table_and_every_legend_names_it():
    """Only Nie Table 1 and Li's modified losses state their runs (three); MACL, OAR, Li's quoted
    InfoNCE/ArcCon and Li Table 5's steps state none, so k = 1 is assumed, and the legend says which."""
    assert published_runs(load_meta("nie2023_table1"), "mpt") == 3
    assert published_runs(load_meta("li2024_table3"), "mmhe") == 3
    assert published_runs(load_meta("li2024_table3"), "infonce") == 1
    assert published_runs(load_meta("macl_table9"), "macl-bs64") == 1
    assert published_runs({"runs": {"default": 1, "methods": {"macl": 3}}}, "macl-bs64") == 3  # its base's
    assert published_runs(load_meta("oar_table3"), "oar_infonce") == 1
    for spec in (get_spec(n) for n in ("nie2023_table1", "li2024_table3", "macl_table3", "oar_table3")):
        assert load_meta(spec.name)["runs"]["source"], spec.name
    assert not runs_assumed(load_meta("nie2023_table1"), "cl")
    assert not runs_assumed(load_meta("li2024_table3"), "mmhe")
    assert not runs_assumed(load_meta("li2024_table3"), "mpt")  # Nie Table 1's caption: three
    assert runs_assumed(load_meta("li2024_table3"), "infonce")
    assert runs_assumed(load_meta("li2024_table5"), "mhe_gd")  # the default, assumed
    assert not runs_assumed(load_meta("li2024_table5"), "mmhe")
    assert runs_assumed(load_meta("macl_table9"), "macl-bs64")
    scores = [get_spec(n) for n, spec in TABLES.items() if spec.kind != "hparams"]
    assert {s.name for s in scores if runs_assumed(load_meta(s.name), "any")} == {
        "li2024_table5",
        "macl_table3",
        "macl_table9",
        "macl_tableB4",
        "oar_table3",
        "oar_table4",
    }
    for spec in scores:
        runs = load_meta(spec.name)["runs"]
        assert set(runs.get("assumed") or []) <= {"default", *(runs.get("methods") or {})}, spec.name
        assert runs_text(load_meta(spec.name)).startswith("Published runs per number: k = "), spec.name
    md = to_markdown(assemble(get_spec("macl_tableB4"), Grid(MACL_CONFIG), macl_metrics()))
    assert "Published runs per number: k = 1 (assumed). Source: As Table 3 (App. B.4)" in md
    assert 'k = 1 widens the interval, which favours "within noise"' in md
    li = {**FULL["experiments"]["li2024"], "backbones": ["bert-base"]}
    li_config = {**LI_BASE, "seeds": [42], "experiments": {"li2024": li}}
    li_md = to_markdown(assemble(get_spec("li2024_table3"), Grid(li_config), frame([])))
    assert "k = 3 (stated); infonce, arccon: k = 1 (assumed). Source: Caption:" in li_md
    nie = to_markdown(
        assemble(get_spec("nie2023_table1"), Grid({"seeds": [42], "experiments": {}}), frame([]))
    )
    assert 'k = 3 (stated). Source: Table 1 caption: "All results reported are the average' in nie
    assert "(assumed)" not in nie


def macl_metrics() -> pd.DataFrame:
    """MACL Table B.4 (BERT-base, published SimCSE 76.25 and MACL 76.66 STS.Avg, single runs)."""
    rows = []
    for seed, simcse, macl in zip((42, 43, 44), (76.0, 77.0, 76.5), (70.0, 71.0, 72.0), strict=True):
        rows += [
            ("macl", "bert-base", "simcse", seed, "sts_avg", simcse),
            ("macl", "bert-base", "macl", seed, "sts_avg", macl),
            ("macl", "bert-base", "macl", seed, "STS12", 90.0 + seed - 43),  # published 67.16
        ]
    rows.append(("macl", "bert-base", "simcse", 42, "STS12", 68.0))  # one seed only
    return frame(rows)


def cells(name: str, config: dict, metrics: pd.DataFrame) -> pd.DataFrame:
    """Table ``name``'s cells assembled from ``metrics`` under ``config``, by (backbone, method, key)."""
    return assemble(get_spec(name), Grid(config), metrics).cells.set_index(["backbone", "method", "key"])


FULL = cl_config.load(REPO_ROOT / "config.yaml")
#: What a li2024 cell's settings resolve from beside its experiment (its search's deviations read them).
LI_BASE = {"training": FULL["training"]}
MACL_CONFIG = {
    "seeds": [42, 43, 44],
    "experiments": {"macl": {**FULL["experiments"]["macl"], "backbones": ["bert-base"]}},
}


def test_verdicts_on_constructed_metrics():
    table = assemble(get_spec("macl_tableB4"), Grid(MACL_CONFIG), macl_metrics())
    c = table.cells.set_index(["method", "key"])
    # pool (bert-base, sts_avg): SS simcse 0.5, SS macl 2 -> s² = 2.5 / 4, df 4; n 3, k 1
    h = T975[4] * math.sqrt(2.5 / 4) * math.sqrt(1 / 3 + 1)
    assert c.loc[("simcse", "sts_avg"), "noise_df"] == 4
    assert c.loc[("simcse", "sts_avg"), "half_width"] == pytest.approx(h, rel=1e-9)
    assert c.loc[("simcse", "sts_avg"), "verdict"] == WITHIN  # 76.50 - 76.25
    assert c.loc[("macl", "sts_avg"), "verdict"] == BELOW  # 71.00 - 76.66
    # pool (bert-base, STS12): macl SS 2 over df 2 (simcse's single seed adds nothing)
    assert c.loc[("macl", "STS12"), "verdict"] == ABOVE  # 90 - 67.16
    assert c.loc[("simcse", "STS12"), "noise_df"] == 2
    assert c.loc[("simcse", "MR"), "verdict"] == "not run"
    csv = to_csv(table)
    assert "verdict" in csv.splitlines()[0] and ",below," in csv
    md = to_markdown(table)
    assert "-5.66 ▼" in md and "+0.25 ≈" in md and "within seed noise" in md
    # four trained cells tested against seed noise (sts_avg and STS12 of each method): 4 × 0.05
    assert "1 ▲ / 1 ▼ (≈0.2 expected by chance), i.e. 4 cells × 0.05" in md


def test_a_pool_never_mixes_training_protocols_or_precisions():
    """Li's InfoNCE trains under SimCSE's protocol in fp16, mMHE under li2024's in fp32; each
    has its own pool, and a claim contrasting them combines the two pools by Satterthwaite."""
    li = {**FULL["experiments"]["li2024"], "backbones": ["bert-base"]}
    config = {**LI_BASE, "seeds": [42, 43, 44], "experiments": {"li2024": li}}
    assert cell_stratum(Grid(config), "li2024", "bert-base", "infonce") == "simcse/fp16"
    assert cell_stratum(Grid(config), "li2024", "bert-base", "mmhe") == "li2024/fp32"
    assert cell_stratum(Grid(config), "li2024", "bert-base", "mmhe~searched") == "li2024/fp32"
    assert cell_stratum(None, "li2024", "bert-base", "mmhe") == ""
    metrics = frame(
        [("li2024", "bert-base", "infonce", 42 + i, "sts_avg", v) for i, v in enumerate((70, 72, 74))]
        + [("li2024", "bert-base", "mmhe", 42 + i, "sts_avg", v) for i, v in enumerate((80.0, 81.0))]
    )
    pools = noise_pools(metrics, "li2024", [42, 43, 44], Grid(config)).set_index("stratum")
    # InfoNCE SS 8 over df 2 (s 2), mMHE SS 0.5 over df 1; one pool would have been s² = 8.5 / 3
    assert pools.loc["simcse/fp16", ["noise_std", "noise_df"]].tolist() == [pytest.approx(2.0), 2]
    assert pools.loc["li2024/fp32", ["noise_std", "noise_df"]].tolist() == [pytest.approx(math.sqrt(0.5)), 1]
    assert noise_pools(metrics, "li2024", None)["noise_df"].tolist() == [3]  # no config: one pool
    c = cells("li2024_table3", config, metrics)
    assert c.loc[("bert-base", "infonce", "sts_avg"), "noise_std"] == pytest.approx(2.0)
    assert c.loc[("bert-base", "mmhe", "sts_avg"), "noise_df"] == 1
    # the claim's contrast mMHE − InfoNCE (seeds differ: unpaired) over two pools: V 0.25 and 4/3, by
    # the conservative Satterthwaite (stats.contrast_variance: each pool's ν − 2, at least 1: 1 and 1)
    claim = {**next(c for c in all_claims() if c["id"] == "li-arccon-met"), "backbones": ["bert-base"]}
    part = evaluate_claim({**claim, "parts": [["mmhe", "infonce"]]}, metrics, Grid(config)).parts[0]
    v1, v2 = 0.5 / 2, 4 / 3
    assert not part.paired and part.df == pytest.approx((v1 + v2) ** 2 / (v1**2 / 1 + v2**2 / 1))
    # half the contrast: each term's share of its pool's variance is c² / n, so the interval halves
    (half,) = evaluate_claim(
        {**claim, "parts": [{"mmhe": 0.5, "infonce": -0.5}]}, metrics, Grid(config)
    ).parts
    assert half.half_width == pytest.approx(part.half_width / 2) and half.df == pytest.approx(part.df)


def test_one_seed_everywhere_is_undecided_and_toy_backbones_have_no_published_number():
    metrics = frame(
        [
            ("macl", "minilm", "simcse", 42, "sts_avg", 70.0),
            ("macl", "bert-base", "macl", 42, "sts_avg", 75.0),
        ]
    )
    macl = {**FULL["experiments"]["macl"], "backbones": ["bert-base", "minilm"]}
    config = {"seeds": [42], "experiments": {"macl": macl}}
    c = cells("macl_tableB4", config, metrics)
    assert c.loc[("bert-base", "macl", "sts_avg"), "verdict"] == UNDECIDED
    assert c.loc[("minilm", "simcse", "sts_avg"), "verdict"] == NO_PUBLISHED  # never a made-up comparison
    # a declared stand-in (the demo's toy runs) compares with the stand-in's published number, marked †
    config["tables"] = {"verdict_stand_ins": {"macl": {"minilm": "bert-base"}}}
    table = assemble(get_spec("macl_tableB4"), Grid(config), metrics)
    c = table.cells.set_index(["backbone", "method", "key"])
    assert c.loc[("minilm", "simcse", "sts_avg"), "compared_with"] == "bert-base (stand-in)"
    assert c.loc[("minilm", "simcse", "sts_avg"), "verdict"] == UNDECIDED
    assert "-6.25 ?†" in to_markdown(table)
    # the legend of the table files names which backbone each toy one stands in for (the report's grid does)
    assert "†: a toy backbone compared with its stand-in's published number (minilm for BERT-base;" in (
        to_markdown(table)
    )
    assert "minilm for BERT-base;" in to_latex(table)


def test_report_counts_verdicts_and_opens_with_claims(tmp_path):
    write_scores(tmp_path / "metrics", macl_metrics())
    build_report(Results(tmp_path), MACL_CONFIG, tables=["macl_tableB4"])
    report = (tmp_path / "report.md").read_text()
    assert report.index("## Claims") < report.index("## Tables")
    row = next(
        line for line in report.splitlines() if line.startswith("| [Huang et al. 2023 (MACL), Table B.4")
    )
    # compared 4: simcse sts_avg (+0.25, within), macl sts_avg (below), macl STS12 (above) and simcse
    # STS12 (one seed, but the pool has df 2: 68.00 vs 68.40, within)
    assert "| 4 | 2 | 1 | 1 | 0 | ≈0.2 |" in row  # then above/below by chance: 4 tested × 0.05
    # the paper's section: its claims before its tables
    macl = report[report.index("\n## Huang et al. 2023") :]
    claims = macl[macl.index("### Claims") : macl.index("### Tables")]
    assert "MACL beats SimCSE on STS.Avg" in claims and "not reproduced (1/2 parts run)" in claims


def test_the_cpu_preset_shows_no_published_number_never_a_made_up_comparison():
    """config/cpu.yaml trains MiniLM + InfoNCE: no paper has a MiniLM row, and the preset declares no
    stand-in, so its cell says "no published number" (and Nie's claims on the paper backbones: not run)."""
    cpu = cl_config.load(REPO_ROOT / "config" / "cpu.yaml")
    assert not cpu["tables"]["verdict_stand_ins"]
    metrics = frame([("nie2023", "minilm", "cl", 42, "sts_avg", 71.3)])
    c = cells("nie2023_table1", cpu, metrics)
    assert c.loc[("minilm", "cl", "sts_avg"), "verdict"] == NO_PUBLISHED
    assert c.loc[("minilm", "cl", "sts_avg"), "compared_with"] == "n/a"
    assert {r.verdict for r in evaluate_claims(metrics, Grid(cpu))} == {NOT_RUN}


def test_chance_count_is_the_tested_trained_cells_times_the_level():
    # 24 trained cells with an interval (20 ≈, 3 ▲, 1 ▼), 2 undecided (no interval) and 4 Pretrained rows
    # (compared at the published rounding, not seed noise): 24 × 0.05 = 1.2 expected by chance
    cells = pd.DataFrame(
        {
            "method": ["cl"] * 26 + ["pretrained"] * 4,
            "verdict": [WITHIN] * 20
            + [ABOVE] * 3
            + [BELOW]
            + [UNDECIDED] * 2
            + [ABOVE, ABOVE, BELOW, WITHIN],
        }
    )
    tested, expected = chance_expected(cells)
    assert tested == 24 and expected == pytest.approx(1.2, rel=1e-12)
    assert chance_text(cells) == "3 ▲ / 1 ▼ (≈1.2 expected by chance)"
    assert chance_text(cells.assign(verdict=UNDECIDED)) == ""
