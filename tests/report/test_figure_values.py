"""Claims read off a figure's numbers (contrastlab.report.figure_values): readings on constructed CSVs
checked by hand, and OAR's synthetic rank-1 claim, which the pipeline's Table 2 numbers contradict."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from contrastlab.config import Grid
from contrastlab.figures import catalog as figure_catalog
from contrastlab.paths import REPO_ROOT
from contrastlab.report.claims import (
    NOT_REPRODUCED,
    NOT_RUN,
    REPRODUCED,
    UNDECIDED,
    check_relation,
    evaluate_claim,
    numbers_text,
)
from tests.report.test_claims import FULL, claim


def grid(tmp_path, names=("nie2023", "li2024_conjectures", "li2024_fig6_r"), **extra) -> Grid:
    """One seed of config.yaml's experiments ``names``, its results (the figures' CSVs) under ``tmp_path``."""
    experiments = {n: FULL["experiments"][n] for n in names}
    return Grid({"seeds": [42], "experiments": experiments, "results_dir": str(tmp_path), **extra})


def write(tmp_path, name: str, frame: pd.DataFrame) -> None:
    path = tmp_path / "figures" / f"{name}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False)


def synthetic(ranks: dict[int, int]) -> pd.DataFrame:
    """table2_numbers.csv as rule oar_synthetic writes it: InfoNCE (ntxent) ± OAR per seed."""
    rows = []
    for seed, rank in ranks.items():
        rows += [
            dict(loss="ntxent", oar=False, seed=seed, effective_rank=rank, diverged=False),
            dict(loss="ntxent", oar=True, seed=seed, effective_rank=3, diverged=False),
        ]
    return pd.DataFrame(rows)


def test_the_synthetic_rank_one_claim_is_decided_over_the_seeds(tmp_path):
    """InfoNCE's mean effective rank against 1.5 with the t-interval: 3, 3, 3 a plane; 1, 1, 1 a line; 1, 2,
    1 (±1.43) cannot tell; one seed has no interval."""
    c = claim("oar-synthetic-infonce-rank-one")
    g = grid(tmp_path, oar_synthetic={})
    assert evaluate_claim(c, pd.DataFrame(), g).verdict == NOT_RUN  # the study has not run
    for ranks, verdict, text in [
        ({0: 3, 1: 3, 2: 3}, NOT_REPRODUCED, "= 3 (claimed < 1.5, ±0 over 3 seeds: not reproduced)"),
        ({0: 1, 1: 1, 2: 1}, REPRODUCED, ""),
        ({0: 1, 1: 2, 2: 1}, UNDECIDED, "±1.43 over 3 seeds: undecided"),
        ({0: 3}, UNDECIDED, "= 3 (claimed < 1.5, ±? over 1 seed: undecided)"),  # one seed: no interval
    ]:
        write(tmp_path, "oar_synthetic/table2_numbers", synthetic(ranks))
        result = evaluate_claim(c, pd.DataFrame(), g)
        assert result.verdict == verdict and text in numbers_text(result)
    # a config without the study: not run, whatever lies in the folder
    assert evaluate_claim(c, pd.DataFrame(), grid(tmp_path)).verdict == NOT_RUN


def sweep_rows(ranks: dict[str, list[int]]) -> pd.DataFrame:
    """table2_sweep.csv as rule oar_synthetic writes it: InfoNCE without OAR per setting and seed."""
    return pd.DataFrame(
        [
            dict(setting=setting, loss="ntxent", oar=False, seed=seed, effective_rank=rank)
            for setting, values in ranks.items()
            for seed, rank in enumerate(values)
        ]
    )


SETTINGS = [
    "optimizer=adam, lr=0.001",
    "lr=0.01",
    "lr=0.1",
    "epochs=200",
    "point_noise=0.025, view_noise=0.025",
    "point_noise=0.1, view_noise=0.1",
]


def test_the_sweep_claim_needs_one_reading_with_a_line(tmp_path):
    """Every setting a plane: not reproduced under any reading; one setting on a line: reproduced; one
    setting undecided and none on a line: undecided (the noise could hide a reading where it holds)."""
    c = claim("oar-synthetic-infonce-rank-one-any-reading")
    g = grid(tmp_path, oar_synthetic={})
    # 1, 1.2, 1.1: below 1.5 at its own 95 % (1.1 ± 0.25), not at 1 − 0.05 / 6 (± 0.63): "any of six"
    # at 95 % each read reproduced with chance up to 1 − 0.975⁶ ≈ 14 % where no setting is on a line
    cases = {(3, 3, 3): NOT_REPRODUCED, (1, 1, 1): REPRODUCED, (1, 2, 1): UNDECIDED, (1, 1.2, 1.1): UNDECIDED}
    for lr_0_1, verdict in cases.items():
        rows = sweep_rows({**dict.fromkeys(SETTINGS, [3, 3, 3]), "lr=0.1": lr_0_1})
        write(tmp_path, "oar_synthetic/table2_sweep", rows)
        result = evaluate_claim(c, pd.DataFrame(), g)
        assert result.verdict == verdict, lr_0_1
        assert "99.17 % over the seeds (Bonferroni over its 6 parts); one part" in numbers_text(result)


#: A result typed by hand: a count of seeds or runs ("in 14 of 20 seeds", "over 20 seeds", "all 20").
TYPED_RESULT = re.compile(r"\b\d+ (?:of|out of) \d+ (?:seeds|runs)\b|\bover \d+ seeds\b|\bin all \d+\b", re.I)


def test_no_caption_or_claim_file_types_a_result_a_run_did_not_write():
    """No claim file, caption or claim sentence states a count of our seeds or runs: the run does."""
    folder = REPO_ROOT / "src" / "contrastlab" / "report" / "claims"
    for path in sorted(folder.glob("*.yaml")):
        hits = TYPED_RESULT.findall(path.read_text(encoding="utf-8"))
        assert not hits, f"{path.name}: {hits}"
    for figure in figure_catalog.figures(Grid(FULL)):
        assert not TYPED_RESULT.findall(figure["caption"]), figure["caption"]
    # the pattern finds the sentence this test was written against
    assert TYPED_RESULT.findall("over 20 seeds InfoNCE flattens to a plane in 14 of 20 seeds")


def test_every_row_must_meet_the_bound_and_a_stand_in_backbone_is_read(tmp_path):
    c = claim("li-conj3-ratios-above-one")
    steps = [0, 125, 250]
    frame = pd.DataFrame(
        [
            dict(backbone="tiny-bert", method="baseline", key=key, step=s, value=v)
            for key, values in {"ratio.arccon": [1.2, 1.3, 1.25], "ratio.met": [1.1, 0.98, 1.05]}.items()
            for s, v in zip(steps, values, strict=True)
        ]
    )
    write(tmp_path, "li2024/li2024_fig8b", frame)
    # tiny-bert is no stand-in for bert-base in this config: its rows are not the claim's
    assert evaluate_claim(c, pd.DataFrame(), grid(tmp_path)).verdict == NOT_RUN
    stand_in = {"tables": {"verdict_stand_ins": {"li2024_conjectures": {"tiny-bert": "bert-base"}}}}
    result = evaluate_claim(c, pd.DataFrame(), grid(tmp_path, **stand_in))
    arccon, met = result.parts
    assert arccon.status == REPRODUCED and arccon.diff == pytest.approx(1.2)  # the row nearest the bound
    assert met.status == NOT_REPRODUCED and met.diff == pytest.approx(0.98)  # the row below it
    assert result.verdict == NOT_REPRODUCED
    assert "ratio.met}: 2 of 3 rows > 1 (worst 0.98)" in numbers_text(result)


def test_last_step_growth_and_differences_between_selections(tmp_path):
    c = claim("nie-decoupled-gap-beyond-cl")
    gap = {"cl": [0.4, 0.5, 0.5], "au": [0.4, 0.9, 1.4], "dcl": [0.4, 0.45, 0.45]}
    frame = pd.DataFrame(
        [
            dict(backbone="bert-base", method=m, key="d_gap", step=s, value=v)
            for m, values in gap.items()
            for s, v in zip([0, 100, 200], values, strict=True)
        ]
    )
    # a second seed's rows at the last step: "last" is their mean (au: (1.4 + 1.6) / 2 = 1.5)
    frame.loc[len(frame)] = dict(backbone="bert-base", method="au", key="d_gap", step=200, value=1.6)
    write(tmp_path, "nie2023/nie2023_fig3b", frame)
    result = evaluate_claim(c, pd.DataFrame(), grid(tmp_path))
    au_cl, dcl_cl, au_growth, dcl_growth = result.parts
    assert au_cl.diff == pytest.approx(1.0) and au_cl.status == REPRODUCED  # 1.5 − 0.5
    assert dcl_cl.diff == pytest.approx(-0.05) and dcl_cl.status == NOT_REPRODUCED  # 0.45 − 0.5
    assert au_growth.diff == pytest.approx(1.1) and dcl_growth.diff == pytest.approx(0.05)
    assert result.verdict == NOT_REPRODUCED
    assert "(claimed > 0)" in numbers_text(result)


def test_weighted_means_of_densities(tmp_path):
    c = claim("li-conj1-gd-closes-pos-neg")
    cos = [0.2, 0.4, 0.6, 0.8]
    dens = {  # mean cosines: no_gd negative 0.3, positive 0.7; baseline negative 0.4, positive 0.6
        ("no_gd", "negative"): [1, 1, 0, 0],
        ("no_gd", "positive"): [0, 0, 1, 1],
        ("baseline", "negative"): [1, 2, 1, 0],
        ("baseline", "positive"): [0, 1, 2, 1],
    }
    frame = pd.DataFrame(
        [
            dict(method=m, pair=p, cosine=x, density=d)
            for (m, p), ds in dens.items()
            for x, d in zip(cos, ds, strict=True)
        ]
    )
    write(tmp_path, "li2024/li2024_fig5", frame)
    result = evaluate_claim(c, pd.DataFrame(), grid(tmp_path))
    # (0.7 − 0.3) − (0.6 − 0.4) = 0.2: with GD the positives lie closer to the negatives
    assert result.parts[0].diff == pytest.approx(0.2) and result.verdict == REPRODUCED


def test_combine_any_needs_one_part_per_backbone(tmp_path):
    c = claim("nie-align-uniform-miss-the-gap")

    def runs(au: tuple[float, float], split: str = "dev") -> pd.DataFrame:
        rows = [
            ("bert-base", m, s, a, u, 70.0, split)
            for m, (a, u) in {"cl": (0.20, -2.0), "au": au}.items()
            for s in (42, 43)
        ]
        return pd.DataFrame(
            rows, columns=["backbone", "method", "seed", "alignment", "uniformity", "sts_avg", "split"]
        )

    write(tmp_path, "nie2023/align_uniform", runs((0.25, -2.3)))  # worse alignment, better uniformity
    result = evaluate_claim(c, pd.DataFrame(), grid(tmp_path))
    assert [p.status for p in result.parts] == [NOT_REPRODUCED, REPRODUCED]
    assert result.verdict == REPRODUCED
    assert "one part on each backbone suffices" in numbers_text(result)
    write(tmp_path, "nie2023/align_uniform", runs((0.25, -1.8)))  # L_cl better on both: the metrics see it
    assert evaluate_claim(c, pd.DataFrame(), grid(tmp_path)).verdict == NOT_REPRODUCED
    # measured on STS-B test (cells evaluated before the measures moved to dev), or a figure drawn before
    # its CSV named the split: not Fig. 1a's numbers
    write(tmp_path, "nie2023/align_uniform", runs((0.25, -1.8), split="test"))
    assert evaluate_claim(c, pd.DataFrame(), grid(tmp_path)).verdict == NOT_RUN
    write(tmp_path, "nie2023/align_uniform", runs((0.25, -1.8)).drop(columns="split"))
    assert evaluate_claim(c, pd.DataFrame(), grid(tmp_path)).verdict == NOT_RUN


NOISY = {"csv": "a/b", "column": "v", "at": "mean", "noise": "seeds", "above": 0}


@pytest.mark.parametrize(
    "part, error",
    [
        ({"csv": "a/b", "column": "v", "rows": {}}, "one bound"),
        ({"csv": "a/b", "column": "v", "rows": {}, "above": 1, "below": 2}, "one bound"),
        ({"csv": "a/b", "column": "v", "above": 1}, "rows or terms"),
        ({"csv": "a/b", "column": "v", "at": "median", "rows": {}, "above": 1}, "at must be"),
        ({"csv": "a/b", "column": "v", "terms": [[1, {}], [-1, {}]], "above": 1}, "one selection"),
        ({"column": "v", "rows": {}, "above": 1}, "csv"),
        # the t-interval is over one selection's seeds: a difference or a weighted mean is not its mean
        ({**NOISY, "terms": [[1, {}], [-1, {}]]}, "noise"),
        ({**NOISY, "weights": "w", "rows": {}}, "noise"),
    ],
)
def test_malformed_parts_are_refused(part, error):
    bad = {"id": "x", "relation": "figure_values", "backbones": ["b"], "parts": [part]}
    with pytest.raises(ValueError, match=error):
        check_relation(bad, "test")
    with pytest.raises(ValueError, match="combine"):
        check_relation({**bad, "parts": [], "combine": "some"}, "test")
