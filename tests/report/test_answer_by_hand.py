"""The report's headline rows by hand (contrastlab.report.answer.headline_row): the paper's own backbone
beside a toy backbone standing in for it: ours is its own, unmarked (the stand-in alone: test_answer.py)."""

from __future__ import annotations

import pandas as pd

from contrastlab.blocks import cell_text
from contrastlab.config import Grid
from contrastlab.report.answer import headline_row
from contrastlab.tables import get_spec
from contrastlab.tables.assemble import assemble
from tests.tables.test_verdicts import MACL_CONFIG, frame

HEADLINE = {"table": "macl_tableB4", "method": "macl", "task": "sts_avg", "backbone": "bert-base"}
#: MACL on BERT-base itself and on tiny-bert standing in for it, in one preset
BOTH = {
    **MACL_CONFIG,
    "experiments": {"macl": {**MACL_CONFIG["experiments"]["macl"], "backbones": ["bert-base", "tiny-bert"]}},
    "tables": {"verdict_stand_ins": {"macl": {"tiny-bert": "bert-base"}}},
}


def _metrics(backbones: dict[str, tuple[list[float], list[float]]]) -> pd.DataFrame:
    """STS.Avg of SimCSE and MACL per backbone over seeds 42-44."""
    rows = []
    for backbone, (simcse, macl) in backbones.items():
        for seed, s, m in zip((42, 43, 44), simcse, macl, strict=True):
            rows += [
                ("macl", backbone, "simcse", seed, "sts_avg", s),
                ("macl", backbone, "macl", seed, "sts_avg", m),
            ]
    return frame(rows)


def test_the_papers_own_backbone_beside_a_stand_in_is_ours_and_unmarked():
    """BERT-base's MACL: mean 71.00, s = 1.00, 71.00 - 76.50 = -5.50 over its SimCSE; Δ 71.00 - 76.66 =
    -5.66 against the published number. tiny-bert's (mean 61.00) stands in only where BERT-base is not
    configured: here ours is BERT-base's, with no stand-in label and no †."""
    metrics = _metrics(
        {"bert-base": ([76.0, 77.0, 76.5], [70.0, 71.0, 72.0]), "tiny-bert": ([60.0] * 3, [60.0, 61.0, 62.0])}
    )
    table = assemble(get_spec("macl_tableB4"), Grid(BOTH), metrics)
    row = headline_row(table, HEADLINE, "x.md")
    assert (row["published"], row["ours"], cell_text(row["Δ"])) == (
        "76.66 (+0.41)",
        "71.00 ± 1.00 (-5.50)",
        "-5.66 ▼",
    )
    assert cell_text(row["main number"]).endswith(": w/ MACL STS.Avg, BERT-base")
    # BERT-base configured but not run: ours is its "not run", never the stand-in's 61.00
    only_toy = metrics[metrics["backbone"] == "tiny-bert"]
    row = headline_row(assemble(get_spec("macl_tableB4"), Grid(BOTH), only_toy), HEADLINE, "x.md")
    assert (row["ours"], cell_text(row["Δ"])) == ("not run", "–")
