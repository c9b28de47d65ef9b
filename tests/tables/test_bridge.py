"""The bridge table (contrastlab.tables.bridge) and its section in the report, from bridge.json files."""

import csv
import json
from pathlib import Path

from contrastlab.evaluation.bridge import BRIDGE_FILE, PROVENANCE_FILE, STEPS
from contrastlab.paths import Results
from contrastlab.report import build_report
from contrastlab.tables.bridge import bridge_rows, write_bridge_table

PARTS = dict(zip(STEPS, [-1.25, 0.0, 0.5, 0.0, 0.000004], strict=True))


def _write_bridge(results: Results, place: str) -> None:
    folder = results.mteb(place)
    total = sum(PARTS.values())
    task = {"mteb_task": "STSBenchmark", "senteval": 80.0, "mteb": 80.0 + total, "total": total}
    task |= {"parts": PARTS, "chain": {}, "counts": {}}
    bridge = {"tasks": {"STSBenchmark": task}, "sentence_transformers": {"STSBenchmark": task["mteb"]}}
    Path(folder).mkdir(parents=True)
    Path(folder, BRIDGE_FILE).write_text(json.dumps(bridge))
    Path(folder, PROVENANCE_FILE).write_text(json.dumps({"data": "standin"}))


def test_one_row_per_checkpoint_and_task_whose_parts_add_up_also_in_the_report(tmp_path):
    results = Results(tmp_path)
    _write_bridge(results, "nie2023/tiny-bert/cl/seed42")
    paths = write_bridge_table(bridge_rows(results), tmp_path / "tables")
    assert [p.name for p in paths] == ["bridge.csv", "bridge.md"]
    (row,) = list(csv.DictReader(paths[0].open()))
    assert row["checkpoint"] == "nie2023/tiny-bert/cl/seed42" and row["MTEB data"] == "standin"
    assert (row["SentEval"], row["MTEB"], row["text form"], row["pairs present"]) == (
        "80.00",
        "79.25",
        "-1.250",
        "+0.500",
    )
    assert row["sum of parts"] == row["MTEB - SentEval"] == "-0.750"
    assert row["ST evaluator"] == row["MTEB"]
    lines = paths[1].read_text().splitlines()
    assert lines[0] == "# SentEval protocol -> MTEB, step by step"
    assert lines[3] == "|---|---|---|" + "---:|" * 10  # the numbers right-aligned, as in every other table
    assert any(
        line.startswith("| nie2023/tiny-bert/cl/seed42 | STSBenchmark | standin | 80.00 |") for line in lines
    )
    assert bridge_rows(Results(tmp_path / "none")) == []  # no bridge.json: no rows, and no table
    assert write_bridge_table([], tmp_path / "none") == [] and not (tmp_path / "none").exists()
    config = {"seeds": [42], "experiments": {"macl": {"backbones": ["bert-base"], "methods": {}}}}
    written = build_report(results, config)
    assert tmp_path / "tables" / "bridge.csv" in written
    report = (tmp_path / "report.md").read_text()
    assert "## SentEval protocol and MTEB on the same checkpoints" in report
    assert "| nie2023/tiny-bert/cl/seed42 | STSBenchmark | standin | 80.00 |" in report
    assert "|---|---|---|" + "---:|" * 10 in report
