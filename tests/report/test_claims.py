"""Paper claims (contrastlab.report.claims): quotes verbatim in the papers, cells that exist in the config,
verdicts on constructed metrics checked by hand, and the add-seeds command selecting exactly the cells."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest
import yaml
from scipy import stats
from test_papers import FOUR_PAPERS

from contrastlab import config as cl_config
from contrastlab.config import Grid
from contrastlab.figures import catalog as figure_catalog
from contrastlab.paths import REPO_ROOT, shared_dir
from contrastlab.report.claims import (
    MIN_SEEDS,
    NOT_CONFIGURED,
    NOT_REPRODUCED,
    NOT_RUN,
    PAPERS,
    REPRODUCED,
    UNDECIDED,
    add_seeds_commands,
    all_claims,
    check_relation,
    evaluate_claim,
    load_claims,
    numbers_text,
    seed_plan,
    verdict_text,
)
from contrastlab.tables import TABLES
from contrastlab.tables.published import load_published
from tests.tables.tables_synthetic import scores_frame

T975 = {2: 4.302652729911275, 4: 2.7764451051977987}
FULL = cl_config.load(REPO_ROOT / "config.yaml")


def normalised(text: str) -> str:
    """Whitespace (spaces, tabs, line breaks) collapsed to single spaces: the only normalisation."""
    return re.sub(r"\s+", " ", text).strip()


@pytest.mark.parametrize("claim", all_claims(), ids=lambda c: c["id"])
def test_quote_is_verbatim_in_the_paper(claim):
    """... and each ``where: §3.1, Fig. 1c-d`` names a section (its heading to the next one not below it) that
    names that figure: Nie's Fig. 1 is discussed in §3.1, not in §2 (Table 1's section)."""
    shared = shared_dir()
    if shared is None or not (shared / "papers" / claim["file"]).is_file():
        pytest.skip(
            f"../shared/papers/{claim['file']} is absent (set CONTRASTLAB_SHARED to check the quotes)"
        )
    lines = (shared / "papers" / claim["file"]).read_text(encoding="utf-8").splitlines()
    assert normalised(claim["quote"]) in normalised("\n".join(lines))
    heading = re.compile(r"(?:#+ *)?(?:\*\*)?(\d{1,2}(?:\.\d{1,2})*)\.?(?:\*\*)? +[A-Z]")
    heads = [(i, m[1]) for i, line in enumerate(lines) if len(line) < 120 and (m := heading.match(line))]
    for number, figure in re.findall(r"§([\d.]+), (?:[^;,]*, )?Fig\. (\d+)", claim["where"]):
        start = next(i for i, n in heads if n == number)
        end = next((i for i, n in heads if i > start and not n.startswith(number + ".")), len(lines))
        named = re.search(rf"Figures? {figure}(?!\d)", "\n".join(lines[start:end]))
        assert named, f"{claim['file']}: §{number} does not name Figure {figure}"


def test_every_claim_names_cells_and_links_of_the_full_config():
    figures = {f["name"] for f in figure_catalog.figures(Grid(FULL))}
    ids = [c["id"] for c in all_claims()]
    assert len(ids) == len(set(ids))
    for paper in PAPERS:
        # Li's: 15 on its tables and training logs, and 4 on its simulated figures (issue 86); a paper
        # added as docs/adding-a-paper.md says states one or more (the page's example: 1)
        count = len(load_claims(paper)["claims"])
        assert 5 <= count <= 19 if paper in FOUR_PAPERS else count >= 1, paper
    for claim in all_claims():
        if claim.get("relation") == "figure_values":  # read off a figure's CSV: a figure of the config
            assert claim["experiment"] in FULL["experiments"] or FULL.get(claim["experiment"]) is not None
            for link in claim["links"]:
                assert link in figures, (claim["id"], link)
            for part in claim["parts"]:  # the CSV is a figure's own, or written beside it (table2_numbers)
                assert any(part["csv"].startswith(link) for link in claim["links"]), (claim["id"], part)
            continue
        exp = FULL["experiments"][claim["experiment"]]
        names = set(exp["methods"]) | set(cl_config.expanded_methods(exp)) | {"pretrained"}
        for part in claim["parts"]:
            terms = part if isinstance(part, list) else list(part)
            if claim.get("relation") == "trend":  # {sweep: method, direction, over}: a swept method
                assert part["sweep"] in exp["methods"] and exp.get("sweep"), claim["id"]
                terms = []
            for method in terms:
                method, _, task = method.partition("/")  # a term on another task: method/task
                assert not task or any(  # a task of the claim's tables
                    task in set(load_published(link)["key"]) for link in claim["links"] if link in TABLES
                ), (claim["id"], task)
                base, _, where = method.partition("@")
                assert base in names, (claim["id"], method)
                assert where in ("", "min", "max", "best"), (claim["id"], method)
        assert set(claim["backbones"]) <= set(exp["backbones"]), claim["id"]
        for link in claim["links"]:
            assert link in TABLES or link in figures, (claim["id"], link)


def test_a_claim_the_presets_grid_cannot_run_reads_not_configured():
    """Not "not run" (a rerun fills it) but "not configured", as the tables word a cell outside the grid:
    every claim on cpu.yaml (MiniLM and InfoNCE only), none on config.yaml."""
    cpu, empty = cl_config.load(REPO_ROOT / "config" / "cpu.yaml"), metrics({})
    assert {evaluate_claim(c, empty, Grid(FULL)).kind for c in all_claims()} == {NOT_RUN}
    assert {evaluate_claim(c, empty, Grid(cpu)).kind for c in all_claims()} == {NOT_CONFIGURED}


def metrics(cells: dict[tuple[str, str], list[float]], experiment: str = "macl", task: str = "sts_avg"):
    return scores_frame(
        (experiment, backbone, method, 42 + i, task, v)
        for (backbone, method), values in cells.items()
        for i, v in enumerate(values)
    )


def claim(claim_id: str) -> dict:
    return next(c for c in all_claims() if c["id"] == claim_id)


def swept(name: str, seeds: list[int], sweep: dict) -> Grid:
    """The grid of config.yaml's experiment ``name`` alone, at ``seeds``, swept over ``sweep``."""
    spec = {**FULL["experiments"][name], "sweep": sweep, "seeds": seeds}
    return Grid({"seeds": seeds, "experiments": {name: spec}})


MACL = {"seeds": [42, 43, 44], "experiments": {"macl": FULL["experiments"]["macl"]}}
NIE = {"seeds": [42, 43, 44], "experiments": {"nie2023": FULL["experiments"]["nie2023"]}}
#: MACL's STS.Avg claim with bert-base reproduced and roberta-base undecided (4 seeds would decide it).
CLOSE = {
    ("bert-base", "simcse"): [76.0, 77.0, 78.0],
    ("bert-base", "macl"): [76.5, 77.5, 78.3],
    ("roberta-base", "simcse"): [80.0, 80.0, 80.0],
    ("roberta-base", "macl"): [80.1, 80.4, 80.4],
}


def test_a_claim_that_holds_one_contradicted_and_one_within_noise():
    for gap, verdict in ((5, REPRODUCED), (-5, NOT_REPRODUCED)):  # MACL 5 points above SimCSE, or below
        runs = {(b, m): [70 + gap * (m == "macl") + s for s in (0, 0.5, 1)] for b, m in CLOSE}
        assert evaluate_claim(claim("macl-sts-avg"), metrics(runs), Grid(MACL)).verdict == verdict
    # within noise: per-seed differences bert 0.5, 0.5, 0.3 (mean 0.4333, SS 0.026667) and roberta 0.1,
    # 0.4, 0.4 (mean 0.3, SS 0.06): paired, each backbone its own stratum (two cells of three seeds,
    # ν = 1 · 2 = 2; two cells' seed-blocked s² is half the differences' variance, so se² = s_D² / 3):
    # bert s_D² = 0.013333, se = 1/15; roberta s_D² = 0.03, se = 0.1
    close = metrics(CLOSE)
    result = evaluate_claim(claim("macl-sts-avg"), close, Grid(MACL))
    bert, roberta = sorted(result.parts, key=lambda p: p.backbone)
    assert bert.paired and bert.df == 2 and bert.half_width == pytest.approx(T975[2] / 15, rel=1e-9)
    assert bert.diff == pytest.approx(0.4333333, abs=1e-6) and bert.status == REPRODUCED  # 0.433 > h = 0.287
    assert roberta.df == 2 and roberta.half_width == pytest.approx(T975[2] * 0.1, rel=1e-9)
    assert roberta.diff == pytest.approx(0.3, abs=1e-9) and roberta.status == UNDECIDED  # h = 0.430
    # 4 seeds: t_3 (ν(4) = max(2, 3)) · sqrt(0.03 / 4) = 0.276 < 0.3
    assert roberta.seeds_needed == 4 and result.verdict == UNDECIDED
    assert verdict_text(result) == "undecided: ~4 seeds per cell would decide it"


def test_unpaired_claims_use_the_pooled_noise_and_deterministic_pretrained_rows():
    frame = metrics(
        {
            ("bert-base", "cl"): [75.0, 76.0, 77.0],  # SS 2
            ("bert-base", "au"): [60.0, 61.0],  # SS 0.5 (a seed missing: not paired)
            ("bert-base", "dcl"): [56.8],
        },
        experiment="nie2023",
    )
    frame = pd.concat(
        [frame, metrics({("bert-base", "pretrained"): [56.7]}, "pretrained")], ignore_index=True
    )
    frame.loc[frame["method"] == "pretrained", "seed"] = pd.NA
    result = evaluate_claim(claim("nie-trained-beat-pretrained-sts"), frame, Grid(NIE))
    parts = {tuple(sorted(p.terms)): p for p in result.parts if p.backbone == "bert-base"}
    s2 = 2.5 / 3  # pooled over cl and au: df 3
    cl = parts[("cl", "pretrained")]
    assert not cl.paired and cl.df == pytest.approx(3)
    assert cl.half_width == pytest.approx(3.182446305284263 * math.sqrt(s2 / 3), rel=1e-9)
    assert cl.status == REPRODUCED
    dcl = parts[("dcl", "pretrained")]  # 56.8 - 56.7 with one seed: h = t_3 · s · 1 > 0.1
    assert dcl.status == UNDECIDED and dcl.seeds_needed > 3
    assert result.verdict == UNDECIDED and "parts run" in verdict_text(result)
    assert parts[("au", "pretrained")].status == REPRODUCED
    assert evaluate_claim(claim("nie-cl-beats-decoupled-sts"), frame.iloc[:0], Grid(NIE)).verdict == NOT_RUN


def test_sweep_positions_and_degenerate_contrasts():
    grid = swept("oar_cifar10", [42, 43], {"lr": [0.01, 1.0]})
    cells = {}
    for method, best, high in (("infonce", 40, 10), ("oar_infonce", 50, 60)):
        cells[("resnet18-oar", f"{method}-lr0.01")] = [best, best + 1]
        cells[("resnet18-oar", f"{method}-lr1.0")] = [high, high + 1]
    frame = metrics(cells, "oar_cifar10", "ffn10_top1")
    high = evaluate_claim(claim("oar-doubles-at-high-lr"), frame, grid)
    first = next(p for p in high.parts if p.status != NOT_RUN)
    assert first.terms == {"oar_infonce-lr1.0": 1.0, "infonce-lr1.0": -2.0}
    assert first.diff == pytest.approx(60.5 - 2 * 10.5) and high.verdict == REPRODUCED
    best = evaluate_claim(claim("oar-improves-10pct"), frame, grid)
    assert next(p for p in best.parts if p.status != NOT_RUN).terms == {
        "oar_infonce-lr1.0": 1.0,
        "infonce-lr0.01": -1.0,
    }
    # OAR's own best rate is its largest: "lower at the largest rate than at the best" compares a cell
    # with itself, the claimed drop is absent
    cells[("resnet18-oar", "infonce-lr1.0")] = [45, 46]
    at_best = {  # oar-original-collapses before it became a trend (report.trend)
        **claim("oar-improves-10pct"),
        "parts": [["infonce@best", "infonce@max"]],
    }
    collapse = evaluate_claim(at_best, metrics(cells, "oar_cifar10", "ffn10_top1"), grid)
    assert next(p for p in collapse.parts if p.status != NOT_RUN).status == NOT_REPRODUCED
    # a one-point sweep has no smallest and largest to compare
    one = swept("macl_cifar10", [42], {"batch_size": [64]})
    assert evaluate_claim(claim("macl-cifar-margin-small-batch"), frame.iloc[:0], one).verdict == NOT_RUN


def parse_command(command: str) -> dict:
    """The --config overrides of one printed command, as Snakemake would merge them."""
    return {key: yaml.safe_load(value) for key, value in re.findall(r"'(\w+)=(.*?)'", command)}


def macl_plan(backbone: str, seeds: list[int], new: list[int]) -> list[dict]:
    """A seed plan of one step: MACL's two methods on ``backbone`` brought to ``seeds``, ``new`` added."""
    return [dict(experiment="macl", backbone=backbone, methods=["macl", "simcse"], seeds=seeds, new=new)]


#: The seed plan that brings MACL's roberta-base cells to a fourth seed, and the cells it adds.
ROBERTA_FOURTH_SEED = macl_plan("roberta-base", [42, 43, 44, 45], [45])
FOURTH_SEED_CELLS = {("macl", "roberta-base", "macl", 45), ("macl", "roberta-base", "simcse", 45)}


def cells_of_command(command: str) -> set[tuple]:
    """The cells (experiment, backbone, method, seed) config.yaml runs under a printed command."""
    resolved = cl_config.load(REPO_ROOT / "config.yaml", parse_command(command))
    return {(c.experiment, c.backbone, c.method, c.seed) for c in cl_config.Grid(resolved).cells}


def test_add_seeds_selects_exactly_the_cells_of_undecided_claims():
    close = metrics(CLOSE)  # bert-base reproduced, roberta-base undecided
    config = {**FULL, "experiments": {**FULL["experiments"]}}
    grid = Grid(config)
    results = [evaluate_claim(claim("macl-sts-avg"), close, grid)]
    plan = seed_plan(results, grid)
    assert plan == ROBERTA_FOURTH_SEED
    commands = add_seeds_commands(plan, "config.yaml")
    assert len(commands) == 2 and "tables={partial: true}" in commands[-1]
    assert cells_of_command(commands[0]) == FOURTH_SEED_CELLS
    resolved = cl_config.load(REPO_ROOT / "config.yaml", parse_command(commands[0]))
    assert resolved["experiments"]["nie2023"]["methods"] == FULL["experiments"]["nie2023"]["methods"]


def test_terms_sharing_one_pool_take_its_degrees_of_freedom_once():
    """Unpaired terms drawing on one pool take its ν once, not a Welch–Satterthwaite sum over the terms."""
    frame = metrics(
        {
            ("bert-base", "cl"): [75.0, 76.0, 77.0],  # SS 2
            ("bert-base", "au"): [73.2, 74.2],  # SS 0.5 (a seed missing: not paired)
            ("bert-base", "dcl"): [60.0, 62.0],  # SS 2
        },
        experiment="nie2023",
    )
    result = evaluate_claim(claim("nie-cl-beats-decoupled-sts"), frame, Grid(NIE))
    au = next(p for p in result.parts if p.backbone == "bert-base" and "au" in p.terms)
    # pool (bert-base, sts_avg): s² = 4.5 / 4, ν = 4; cl − au: se² = s² (1/3 + 1/2) = 0.9375.
    # Satterthwaite over the two terms would say ν = (5/6)² / ((1/9 + 1/4) / 4) = 100/13 ≈ 7.69, h ≈ 2.248.
    h = stats.t.ppf(0.975, 4) * math.sqrt(0.9375)  # 2.688
    assert not au.paired and au.df == 4
    assert au.half_width == pytest.approx(h, rel=1e-12)
    # D = 76 − 73.7 = 2.3 lies between the two widths: reproduced with the inflated ν, undecided with ν = 4
    assert au.diff == pytest.approx(2.3, abs=1e-9) and au.status == UNDECIDED


def nie_paired(gaps: dict[str, float], spread: float, task: str = "sts_avg") -> pd.DataFrame:
    """BERT-base cells of Nie's experiment: cl at 70, 71, 72 and each method at cl + gap + (−spread, 0,
    +spread) per seed, so every part is paired with per-seed contrasts of SS 2 · spread². With m methods
    the stratum's seed-blocked residual is (a_i − m/(m + 1)) e_s (a_i = 1 but for cl, e the spreads):
    SS = m/(m + 1) · 2 spread² over ν = 2m, s² = spread² / (m + 1), and a part's se² = 2 s² / 3."""
    cl = [70.0, 71.0, 72.0]
    cells = {("bert-base", "cl"): cl}
    for method, gap in gaps.items():
        cells[("bert-base", method)] = [x + gap + e for x, e in zip(cl, (-spread, 0.0, spread), strict=True)]
    return metrics(cells, "nie2023", task)


def test_comparable_claims_are_non_inferiority_tests_at_their_margin():
    # relation ">=", in its per-loss form (MPT, MET and MAT each comparable to L_cl; the shipped claim
    # tests the group's mean, as its sentence names it): the non-inferiority rule on one part at a time
    c = {**claim("nie-new-losses-match-cl"), "parts": [["mpt", "cl"], ["met", "cl"], ["mat", "cl"]]}
    margin = c["noninferiority_margin"]
    assert margin == 0.5
    # four cells (cl, mpt, met, mat), spread 0.1 · sqrt(2): s² = 0.02 / 4, ν = 6, se² = 2 s² / 3 = 0.1² / 3;
    # h = t_{0.975,6} · 0.1 / sqrt(3) = 0.1413
    spread = 0.1 * math.sqrt(2)
    h = stats.t.ppf(0.975, 6) * 0.1 / math.sqrt(3)
    close = evaluate_claim(c, nie_paired({"mpt": -0.3, "met": -0.3, "mat": 0.2}, spread), Grid(NIE))
    mpt = next(p for p in close.parts if p.terms == {"mpt": 1.0, "cl": -1.0} and p.backbone == "bert-base")
    assert mpt.half_width == pytest.approx(h, rel=1e-12)
    # −0.3 is clearly below zero (−0.3 + h < 0) but its lower bound −0.44 is above −0.5: comparable
    assert mpt.diff + h < 0 and mpt.diff - h > -margin and mpt.status == REPRODUCED
    assert close.verdict == REPRODUCED  # (3/12 parts run)
    # −0.8: the upper bound −0.66 is below −0.5: worse than comparable
    worse = evaluate_claim(c, nie_paired({"mpt": -0.8, "met": 0.0, "mat": 0.0}, spread), Grid(NIE))
    assert worse.verdict == NOT_REPRODUCED
    # −0.45: the interval (−0.59, −0.31) holds −0.5: undecided
    edge = evaluate_claim(c, nie_paired({"mpt": -0.45, "met": 0.0, "mat": 0.0}, spread), Grid(NIE))
    assert edge.verdict == UNDECIDED
    # no evidence either way: gaps 0 with seed noise of 2 points (se² = 4 / 6, h = 2.00) are undecided
    noisy = evaluate_claim(c, nie_paired({"mpt": 0.0, "met": 0.0, "mat": 0.0}, 2.0), Grid(NIE))
    assert noisy.verdict == UNDECIDED and noisy.seeds_needed is not None


def test_a_comparable_claim_without_a_margin_is_refused(tmp_path, monkeypatch):
    from contrastlab.report import claims as claims_module

    data = {"paper": "x", "file": "x.md", "claims": [{**claim("nie-new-losses-match-cl")}]}
    data["claims"][0].pop("noninferiority_margin")
    data["claims"][0].pop("paper"), data["claims"][0].pop("file")
    (tmp_path / "nie2023.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    monkeypatch.setattr(claims_module, "CLAIMS_DIR", tmp_path)
    claims_module.load_claims.cache_clear()
    try:
        with pytest.raises(ValueError, match="noninferiority_margin"):
            claims_module.load_claims("nie2023")
    finally:
        claims_module.load_claims.cache_clear()


def test_a_diverged_seed_is_no_score_in_a_contrast():
    """A diverged probe's NaN row is no score, as in the tables: a point diverged at every seed is not run
    and never the best, one diverged seed leaves the others (unpaired). Was a ZeroDivisionError."""
    grid, nan = swept("oar_cifar10", [42, 43, 44], {"lr": [0.01, 1.0]}), math.nan
    cells = {
        ("resnet18-oar", m): v for m, v in (("infonce-lr0.01", [nan] * 3), ("infonce-lr1.0", [10, 11, 12]))
    }
    cells |= {
        ("resnet18-oar", "oar_infonce-lr0.01"): [20, 21, 22],
        ("resnet18-oar", "oar_infonce-lr1.0"): [60, nan, 61],
    }
    result = evaluate_claim(claim("oar-improves-10pct"), metrics(cells, "oar_cifar10", "ffn10_top1"), grid)
    part = next(p for p in result.parts if p.status != NOT_RUN)
    assert part.terms == {"oar_infonce-lr1.0": 1.0, "infonce-lr1.0": -1.0}
    assert part.diff == pytest.approx(49.5)
    assert not part.paired and part.status == REPRODUCED
    cells[("resnet18-oar", "infonce-lr1.0")] = [nan] * 3
    assert (
        evaluate_claim(claim("oar-improves-10pct"), metrics(cells, "oar_cifar10", "ffn10_top1"), grid).verdict
        == NOT_RUN
    )


def nie_claim(claim_id: str, parts: list, task: str | list[str] = "sts_avg", **keys) -> dict:
    """A claim of ``parts`` on Nie's BERT-base cells (``keys``: its relation, margin, ...)."""
    return dict(id=claim_id, experiment="nie2023", task=task, backbones=["bert-base"], parts=parts, **keys)


SIX = ("au", "dcl", "dcl_plus", "mpt", "met", "mat")
SIX_PARTS = nie_claim("six-near-zero-gaps", [[m, "cl"] for m in SIX])


def test_not_reproduced_is_holm_corrected_over_a_claims_parts():
    """Not reproduced is Holm-corrected over the parts (12 uncorrected tests at 0.025: ≈ 26 %)."""
    gaps = dict.fromkeys(SIX, 0.0)
    # seven cells, spread sqrt(7/8): s² = 0.875 / 7 = 0.125, ν = 12, se² = 2 s² / 3 = 0.5² / 3; h = 0.629
    spread, se = math.sqrt(7 / 8), 0.5 / math.sqrt(3)
    one = evaluate_claim(SIX_PARTS, nie_paired({**gaps, "au": -0.7}, spread), Grid(NIE))
    au = next(p for p in one.parts if "au" in p.terms)
    # −0.7 is below its own interval (p = 0.016 < 0.025) but not below Holm's first bar 0.025 / 6
    assert au.diff < -au.half_width
    assert au.p_value == pytest.approx(stats.t.cdf(-0.7 / se, 12), rel=1e-9)  # 0.0160
    assert au.status == UNDECIDED and one.verdict == UNDECIDED
    # far below: p = 7.9e-6 < 0.025 / 6; then −0.9 (p = 0.00445) passes the second bar 0.025 / 5 only
    # because the first part was rejected (step-down; Bonferroni's 0.025 / 6 would not reject it)
    two = evaluate_claim(SIX_PARTS, nie_paired({**gaps, "au": -2.0, "dcl": -0.9}, spread), Grid(NIE))
    status = {next(iter(p.terms)): p.status for p in two.parts}
    assert status["au"] == status["dcl"] == NOT_REPRODUCED and two.verdict == NOT_REPRODUCED
    assert set(status.values()) == {NOT_REPRODUCED, UNDECIDED}
    assert "2 of 6 parts contradicted" in verdict_text(two)
    alone = evaluate_claim(SIX_PARTS, nie_paired({**gaps, "dcl": -0.9}, spread), Grid(NIE))
    assert alone.verdict == UNDECIDED


def test_paired_parts_that_share_cells_count_the_cells_degrees_of_freedom_once():
    """Audit S-1: six pairs of four cells at three seeds. Pooling the six parts' per-seed contrasts as
    if independent said ν = 6 · 2 = 12; the stratum's seed-blocked pool has ν = (4 − 1)(3 − 1) = 6."""
    methods = ("cl", "au", "dcl", "mpt")
    pairs = [[b, a] for i, a in enumerate(methods) for b in methods[i + 1 :]]
    all_pairs = nie_claim("all-pairs-of-four", pairs)
    # seed effect 70, 71, 72 + means cl 0, au 2, dcl 4, mpt 4.46 + residuals cl (0.3, −0.3, 0),
    # au (−0.3, 0.3, 0), dcl and mpt 0 (summing to 0 over every cell and every seed): the blocked fit
    # leaves exactly these, SS 0.36 over ν 6, s² = 0.06, and a part's se² = 2 s² / 3 = 0.04, se = 0.2.
    # The old pooling: Σ SS over the six parts = 1.44 over 12 = 0.12 = 2 s², the same se, twice the ν.
    residual = {"cl": (0.3, -0.3, 0.0), "au": (-0.3, 0.3, 0.0)}
    frame = metrics(
        {
            ("bert-base", m): [70 + s + gap + residual.get(m, (0.0,) * 3)[s] for s in range(3)]
            for m, gap in zip(methods, (0.0, 2.0, 4.0, 4.46), strict=True)
        },
        experiment="nie2023",
    )
    result = evaluate_claim(all_pairs, frame, Grid(NIE))
    assert len(result.parts) == 6 and all(p.paired for p in result.parts)
    assert [p.df for p in result.parts] == [6] * 6
    h6 = stats.t.ppf(0.975, 6) * 0.2  # 0.4894 (ν = 12 said t_12 · 0.2 = 0.4358)
    assert all(p.half_width == pytest.approx(h6, rel=1e-9) for p in result.parts)
    top = next(p for p in result.parts if p.terms == {"mpt": 1.0, "dcl": -1.0})
    # 0.46 clears ν = 12's 0.4358 but not ν = 6's 0.4894: reproduced before, undecided now
    assert top.diff == pytest.approx(0.46, abs=1e-9) and top.status == UNDECIDED
    assert result.verdict == UNDECIDED
    # 4 seeds: t_6 (ν(4) = max(6, 3)) · sqrt(2 · 0.06 / 4) = 0.4238 < 0.46
    assert top.seeds_needed == 4


def test_paired_noise_is_pooled_per_task_not_over_the_claim():
    """Audit S-2: one paired part on two tasks whose seed noise differs 20-fold. Each task is its own
    stratum, so each has its own half-width; one s_D over the claim gave both 2.27."""
    two_tasks = nie_claim("one-part-two-tasks", [["au", "cl"]], ["sts_avg", "tr_devacc_avg"])
    frames = []
    for task, base, spread in (("sts_avg", 70.0, 0.1), ("tr_devacc_avg", 80.0, 2.0)):
        cl = [base, base + 1, base + 2]
        au = [x + 1 + e for x, e in zip(cl, (-spread, 0.0, spread), strict=True)]
        frames.append(metrics({("bert-base", "cl"): cl, ("bert-base", "au"): au}, "nie2023", task))
    result = evaluate_claim(two_tasks, pd.concat(frames, ignore_index=True), Grid(NIE))
    sts, tr = sorted(result.parts, key=lambda p: p.task)
    # per task two cells, ν = 2, se² = s_D² / 3: STS s_D² = 0.01, se = 0.0577, h = 0.2484;
    # TR s_D² = 4, se = 1.1547, h = 4.9683. Pooled over the claim: s_D² = (0.02 + 8) / 4 = 2.005, ν 4,
    # h = t_4 · sqrt(2.005 / 3) = 2.2698 for both
    assert sts.task == "sts_avg" and sts.df == 2 and tr.df == 2
    assert sts.half_width == pytest.approx(T975[2] * 0.1 / math.sqrt(3), rel=1e-9)
    assert tr.half_width == pytest.approx(T975[2] * 2.0 / math.sqrt(3), rel=1e-9)
    assert sts.diff == pytest.approx(1.0) and sts.status == REPRODUCED  # 1 > 0.248
    assert tr.diff == pytest.approx(1.0) and tr.status == UNDECIDED  # 1 < 4.97


def test_li_fig6_claims_read_the_stsb_dev_score_not_the_sts_test_average():
    """Li Fig. 6's claims read the STS-B dev Spearman (§3.2), whatever STS.Avg says."""
    from contrastlab.tables.metrics import DEV_SPEARMAN

    c = claim("li-fig6-m")
    assert c["task"] == DEV_SPEARMAN
    grid = swept("li2024_fig6_m", [42], {"hp.m": [0.3, 0.6, 1.0]})
    m03, m06, m10 = (("bert-base", f"baseline-m{m}") for m in (0.3, 0.6, 1.0))
    dev = metrics({m03: [84.0], m06: [82.1], m10: [80.0]}, "li2024_fig6_m", DEV_SPEARMAN)
    test = metrics({m03: [70.0], m06: [72.0], m10: [75.0]}, "li2024_fig6_m", "sts_avg")
    frame = pd.concat([dev, test], ignore_index=True)  # STS.Avg would say the opposite
    result = evaluate_claim(c, frame, grid)
    assert result.verdict == REPRODUCED and result.parts[0].diff < -5  # a falling trend over m


def test_a_count_claim_needs_that_many_parts_and_no_more():
    """OAR §5.2, "12 out of the 24 reported accuracies": relation count, at_least parts reproduced at the
    claim's margin; not reproduced once too few parts are left uncontradicted; else undecided."""
    parts, tasks = [["au", "cl"], ["dcl", "cl"]], ["sts_avg", "tr_devacc_avg"]
    c = nie_claim("two-of-three", parts, tasks, relation="count", at_least=3, margin=1.0)

    def evaluate(dcl_sts: float):
        """The claim on runs whose four parts are off by 3, ``dcl_sts``, 5 and -4."""
        sts = nie_paired({"au": 3, "dcl": dcl_sts}, 0.1, "sts_avg")
        tr = nie_paired({"au": 5, "dcl": -4}, 0.1, "tr_devacc_avg")
        return evaluate_claim(c, pd.concat([sts, tr], ignore_index=True), Grid(NIE))

    # four parts (2 contrasts × 2 tasks), paired; per task a stratum of three cells (nie_paired's rule at
    # m = 2): s² = 0.01 / 3, ν = 4, se² = 2 s² / 3, h = t_4 · 0.0471 ≈ 0.13
    three = evaluate(2)
    assert len(three.parts) == 4 and {p.task for p in three.parts} == {"sts_avg", "tr_devacc_avg"}
    assert three.verdict == REPRODUCED  # 3 of 4 clear the margin; the fourth (−4) may fail
    level = "(each at level 0.975, Bonferroni over the 2 that may fail)"  # 1 − 0.05 / (4 − 3 + 1)
    assert verdict_text(three).startswith(f"reproduced: 3 of 4 parts clear it, the claim needs 3 {level}")
    assert "bert-base tr_devacc_avg: dcl − cl = -4.00" in numbers_text(three)
    assert evaluate(-2).verdict == NOT_REPRODUCED  # only 2 left uncontradicted
    assert evaluate(1.0).verdict == UNDECIDED  # a gap at the margin: neither clears it nor is contradicted
    # 1.15 clears its own interval (0.15 > h = 0.131) but not the count's bar α / (4 − 3 + 1), 0.165: with
    # two parts at the margin, "3 of 4" at α per part would read reproduced with chance 1 − 0.975² ≈ 4.9 %
    assert evaluate(1.15).verdict == UNDECIDED and "2 of 4 parts clear it" in verdict_text(evaluate(1.15))


def test_a_count_claim_states_how_many():
    base = {"id": "x", "relation": "count", "backbones": ["b"], "task": ["t1", "t2"], "parts": [["a", "b"]]}
    check_relation({**base, "at_least": 2}, "t")
    for bad in ({}, {"at_least": 0}, {"at_least": 3}, {"at_least": 1.5}):
        with pytest.raises(ValueError, match="at_least"):
            check_relation({**base, **bad}, "t")
    with pytest.raises(ValueError, match="at_least is for relation 'count' only"):
        check_relation({**base, "relation": ">", "at_least": 1}, "t")


def test_a_term_on_another_task_is_paired_within_the_same_runs():
    """OAR §5.1: a contrast across two tasks of the same runs, each at its best rate, paired per seed."""
    grid = swept("oar_cifar10", [42, 43], {"lr": [0.01, 1.0]})
    frames = []
    for m in ("oar_infonce", "oar_dcl", "oar_bt", "oar_vicreg"):
        for task, good, bad in (("ffn10_top1", [60, 61], [50, 50]), ("ffn100_top1", [62, 64], [70, 40])):
            cells = {("resnet18-oar", f"{m}-lr0.01"): good, ("resnet18-oar", f"{m}-lr1.0"): bad}
            frames.append(metrics(cells, "oar_cifar10", task))
    result = evaluate_claim(claim("oar-10pct-within-3-of-100pct"), pd.concat(frames), grid)
    part = result.parts[0]
    assert part.terms == {"oar_infonce-lr0.01": 1.0, "oar_infonce-lr0.01/ffn100_top1": -1.0}
    # per seed 60 − 62 and 61 − 64: D −2.5; SS 0.5 per part, pooled over the 4 parts (the same tasks and
    # coefficients, no cell shared): s² 0.5, ν 4, se 0.5
    assert part.paired and part.diff == pytest.approx(-2.5) and part.df == 4
    assert part.half_width == pytest.approx(T975[4] * 0.5, rel=1e-9)
    assert part.status == UNDECIDED  # Δ = −2.5 + 3 = 0.5 < 1.39
    text = numbers_text(result)
    assert "oar_infonce-lr0.01/ffn10_top1 − oar_infonce-lr0.01/ffn100_top1 = -2.50 ± 1.39" in text


def test_nies_overfitting_claim_reads_the_dev_uniformity_rebound_of_each_run(tmp_path):
    """Nie's abstract, "prone to overfitting, which does not occur on the contrastive loss" (Fig. 1): the
    metrics file's training block carries the dev uniformity rebound (last dev evaluation minus the
    minimum), collect_metrics reads it as a task, and the claim compares L_a&u and L_dcl with L_cl."""
    import json

    from contrastlab.evaluation.senteval import dev_rebound
    from contrastlab.tables.metrics import DEV_REBOUND, collect_metrics

    assert dev_rebound([{"dev_uniformity": -2.0}, {"dev_uniformity": -3.5}, {"dev_uniformity": -3.0}]) == 0.5
    assert dev_rebound([{"dev_uniformity": -2.0}]) is None and dev_rebound(None) is None
    rebounds = {"cl": [0.01, 0.02, 0.00], "au": [0.40, 0.50, 0.45], "dcl": [0.30, 0.35, 0.20]}
    for method, values in rebounds.items():
        for seed, value in zip((42, 43, 44), values, strict=True):
            cell = tmp_path / "nie2023" / "bert-base" / method / f"seed{seed}"
            cell.mkdir(parents=True)
            data = {"scores": {}, "sts_avg": 70.0, "training": {DEV_REBOUND: value}}
            (cell / "senteval.json").write_text(json.dumps(data))
    frame = collect_metrics(tmp_path)
    assert sorted(frame[frame.task == DEV_REBOUND]["score"]) == sorted(sum(rebounds.values(), []))
    result = evaluate_claim(claim("nie-decoupled-overfit"), frame, Grid(NIE))
    au, dcl = result.parts
    # paired per seed: au − cl = 0.39, 0.48, 0.45 (mean 0.44); dcl − cl = 0.29, 0.33, 0.20 (mean 0.2733)
    assert au.paired and au.diff == pytest.approx(0.44) and dcl.diff == pytest.approx(0.82 / 3)
    assert result.verdict == REPRODUCED


def macl_with_stand_in(seeds: list[int], backbones: list[str]) -> dict:
    """config.yaml with MACL at ``seeds`` on ``backbones``, tiny-bert (a small random BERT) standing in for
    bert-base in its verdicts."""
    tiny = {"random": {"hidden_size": 32}, "tokenizer_from": "bert-base"}
    return {
        **FULL,
        "seeds": seeds,
        "experiments": {"macl": {**FULL["experiments"]["macl"], "backbones": backbones}},
        "backbones": {**FULL["backbones"], "tiny-bert": tiny},
        "tables": {**FULL["tables"], "verdict_stand_ins": {"macl": {"tiny-bert": "bert-base"}}},
    }


def test_add_seeds_on_a_stand_in_with_seeds_that_do_not_start_at_42():
    """MACL's STS.Avg claim on tiny-bert, one seed (45) per cell: no noise estimate, so the plan adds 46 and
    47 (MIN_SEEDS = 3) to the claim's two methods on tiny-bert; the printed command, its preset's path
    holding a space and a quote, selects exactly those 4 cells."""
    import copy
    import shlex

    from snakemake.utils import update_config

    # roberta-base kept (its methods' per_backbone name it), not run: no cell of it to add seeds to
    toy = macl_with_stand_in([45], ["tiny-bert", "roberta-base"])
    grid = Grid(cl_config.validate(toy))
    one = metrics({("tiny-bert", "simcse"): [76.0], ("tiny-bert", "macl"): [77.0]}).assign(seed=45)
    result = evaluate_claim(claim("macl-sts-avg"), one, grid)
    assert result.verdict == UNDECIDED and result.seeds_needed is None and MIN_SEEDS == 3
    assert numbers_text(result) == "tiny-bert, for bert-base: macl − simcse = +1.00 ± ?"  # whose numbers
    plan = seed_plan([result], grid)
    assert plan == macl_plan("tiny-bert", [45, 46, 47], [46, 47])
    preset = "/w/my presets/it's toy.yaml"
    (command, tables) = add_seeds_commands(plan, shlex.quote(preset))
    words = shlex.split(command)
    assert words[:3] == [".venv/bin/snakemake", "--configfile", preset] and "--workflow-profile" not in words
    merged = copy.deepcopy(toy)
    update_config(merged, parse_command(command))  # as Snakemake merges --config over the preset
    merged = cl_config.validate(merged)
    assert sorted(c.path for c in Grid(merged).cells) == [
        f"macl/tiny-bert/{m}/seed{s}" for m in ("macl", "simcse") for s in (46, 47)
    ]
    assert shlex.split(tables)[3:] == [
        "--config",
        "experiments={macl: {seeds: [45, 46, 47]}}",
        "tables={partial: true}",
        "--forcerun",
        "tables",
    ]


def test_add_seeds_goes_to_the_cells_the_verdict_read_where_the_paper_backbone_runs_beside_its_stand_in():
    """With bert-base configured and tiny-bert standing in for it, the verdict reads bert-base's own cells
    (``Experiment.ours``): so the seeds go there, not to the stand-in's cells it did not read."""
    grid = Grid(cl_config.validate(macl_with_stand_in([42], ["tiny-bert", "bert-base", "roberta-base"])))
    scores = {"simcse": 76.0, "macl": 77.0}
    one = metrics({(b, m): [v] for b in ("tiny-bert", "bert-base") for m, v in scores.items()})
    result = evaluate_claim(claim("macl-sts-avg"), one, grid)
    assert result.verdict == UNDECIDED and numbers_text(result) == "bert-base: macl − simcse = +1.00 ± ?"
    plan = seed_plan([result], grid)
    assert plan == macl_plan("bert-base", [42, 43, 44], [43, 44])
