"""The claims' power before the run (contrastlab.report.power): the noise prior, the plan's claims section
on config.yaml, the seeds it prices (the simulation's own tests: tests/report/test_simulation.py)."""

from __future__ import annotations

import pytest

from contrastlab.config import Grid
from contrastlab.report import power
from tests.report.test_claims import FOURTH_SEED_CELLS, FULL, ROBERTA_FOURTH_SEED, cells_of_command


def test_the_noise_prior_covers_every_metric_of_the_papers_tables():
    for task in ("sts_avg", "tr_avg", "tr_devacc_avg", "STS12", "SICKRelatedness", "MRPC", "linear_top1"):
        assert power.noise_prior(task) > 0
    assert power.noise_prior("ffn100_top5") == power.NOISE_PRIOR["ffn"]
    with pytest.raises(KeyError):
        power.noise_prior("no_such_metric")


@pytest.fixture(scope="module")
def full_power():
    return {p.claim["id"]: p for p in power.claims_power(Grid(FULL), replicates=400)}


def test_config_yaml_power_matches_the_audits_picture(full_power):
    """Claims audit §1.2: the OAR table claims run one seed and are never decided; large gaps are; the
    margin of 3 against Nie's +3.15 / +3.20 is not; figure claims have no numbers to simulate."""
    for cid in ("oar-improves-10pct", "oar-improves-100pct", "oar-cifar100-bt-doubles"):
        assert full_power[cid].seeds == 1 and full_power[cid].probability == 0.0
    for cid in ("nie-trained-beat-pretrained-sts", "nie-gain-mostly-sts", "li-w-improves"):
        assert full_power[cid].decidable and full_power[cid].seeds_needed == 3
    # Nie's "3%-7%" as a relative gain (claims audit C-3): decidable within 10 seeds per cell (as a margin
    # of 3 points against the paper's +3.15 / +3.20 it was not, P ≈ 0.00 at any seed count)
    dcl_plus = full_power["nie-dcl-plus-beats-dcl"]
    assert dcl_plus.probability < 0.2 and dcl_plus.seeds_needed is not None
    assert full_power["nie-mpt-best-margin"].why_not.startswith("figures only")
    assert not full_power["nie-mpt-best-margin"].decidable
    # a figure_values claim reads a regenerated figure: no seed noise, counted apart
    assert full_power["oar-synthetic-infonce-rank-one"].figure_reading
    assert sum(p.figure_reading for p in full_power.values()) == sum(
        p.claim.get("relation") == "figure_values" for p in full_power.values()
    )


def test_more_seeds_are_priced_once_per_cell():
    a, b = ("cell", "b", "x"), ("cell", "b", "y")
    p1 = power.ClaimPower({"id": "p1"}, seeds=3, seeds_needed=5, cells=[a, b])
    p2 = power.ClaimPower({"id": "p2"}, seeds=3, seeds_needed=7, cells=[b])
    hours, runs = power.extra_hours([p1, p2], {a: 1.0, b: 10.0})
    assert runs == 2 + 4 and hours == pytest.approx(2 * 1.0 + 4 * 10.0)


def test_make_plan_prints_the_claims_section(tmp_path, capsys):
    """``scripts/plan.py`` prints :func:`power.power_blocks` (summary, ≥ 35 figure, rows) into plan.md."""
    import functools
    import re

    from contrastlab.cost import calibration as cl_calibration
    from contrastlab.cost import plan

    section = functools.partial(power.power_blocks, replicates=200)
    config = {**FULL, "results_dir": str(tmp_path / "results")}  # no run of the checkout's own counts here
    written = plan.plan_report(
        config,
        "config",
        cl_calibration.DEFAULT_CALIBRATION,
        tmp_path,
        title="config.yaml",
        sections=(section,),
    )
    out = capsys.readouterr().out
    summary = re.search(
        r"Decidable at the configured seeds: (\d+) of (\d+); with ([\d,]+) more seed runs on (\d+) cells "
        r"\(up to 10 seeds per cell\): (\d+) of \2, \+([\d,]+) GPU-hours",
        out,
    )
    assert summary, out[-3000:]
    now, total, _, _, later, _ = summary.groups()
    assert 0 < int(now) < int(later) <= int(total)
    assert re.search(rf"≥ {power.GOAL} of {total} decidable: (\+[\d,]+ GPU-hours|not reachable)", out)
    assert re.search(r"Not counted below: [1-9]\d* figure readings \(no seed noise to simulate", out)
    markdown = written[0].read_text()
    assert "### Claims: would a perfect reproduction decide them?" in markdown
    assert "| nie-dcl-plus-beats-dcl |" in markdown


def test_measured_pools_replace_the_prior():
    """Once runs exist, a pool's own s_p (ν ≥ 2) is the σ its cells are drawn with."""
    from contrastlab.report.claims import all_claims
    from tests.tables.tables_synthetic import scores_frame

    metrics = scores_frame(
        ("nie2023", "bert-base", m, seed, "sts_avg", 76.0 + 0.1 * (seed - 43))
        for m in ("cl", "dcl")
        for seed in (42, 43, 44)
    )
    grid = Grid(FULL)
    measured = power.measured_noise(metrics, grid)
    assert list(measured.values()) == [pytest.approx(0.1)]  # one pool: nie2023 bert-base sts_avg
    claim = next(c for c in all_claims() if c["id"] == "nie-cl-beats-decoupled-sts")
    s = power.claim_structure(claim, grid, measured=measured)
    on_bert = [i for i, (b, _, _) in enumerate(s.cells) if b == "bert-base"]
    assert s.sigma[on_bert] == pytest.approx(0.1)
    others = [i for i, (b, _, _) in enumerate(s.cells) if b != "bert-base"]
    assert s.sigma[others] == pytest.approx(power.noise_prior("sts_avg"))


def test_the_report_notes_what_a_perfect_reproduction_would_need(full_power):
    """An undecided claim's note gives P(decided) and the seeds (and GPU-hours) for P ≥ 0.9."""
    hours = {cell: 2.0 for p in full_power.values() for cell in p.cells}
    tr = full_power["li-modified-beat-originals-tr"]  # P ≈ 0.58 at 3 seeds, 7 needed
    note = power.power_note(tr, hours)
    extra = 2.0 * (tr.seeds_needed - 3) * len(tr.cells)
    assert note == (
        f"undecided at the configured seeds; P(decided) = {tr.probability:.2f} at 3 seeds; needs "
        f"{tr.seeds_needed} seeds per cell for ≥ 0.9 = +{extra:,.1f} GPU-hours"
    )
    assert power.power_note(full_power["macl-sts-tasks-bert"], hours).endswith(
        "not decidable (P ≥ 0.9) within 10 seeds per cell"
    )
    assert power.power_note(full_power["li-fig6-m"], hours).startswith("no power estimate: figures only")
    assert power.power_note(full_power["li-w-improves"], hours).endswith("decidable at the configured seeds")


def test_add_seeds_targets_the_power_on_a_small_config():
    """``make add-seeds TARGET=power``, dry, on MACL's sentence experiment: the one claim more seeds decide
    within 10 per cell, macl-tr-avg-roberta (4 needed), gets exactly its cells' new seed; the others none."""
    from contrastlab.report.claims import add_seeds_commands

    config = {**FULL, "experiments": {"macl": FULL["experiments"]["macl"]}}
    grid = Grid(config)
    powers = power.claims_power(grid)
    by_id = {p.claim["id"]: p for p in powers}
    needs = {cid for cid, p in by_id.items() if not p.decidable and p.seeds_needed}
    assert needs == {"macl-tr-avg-roberta"} and by_id["macl-tr-avg-roberta"].seeds_needed == 4
    plan = power.power_seed_plan(powers, grid)
    assert plan == ROBERTA_FOURTH_SEED
    assert cells_of_command(add_seeds_commands(plan, "config.yaml")[0]) == FOURTH_SEED_CELLS
