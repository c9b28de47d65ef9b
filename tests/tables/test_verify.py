"""Every transcribed published number is where the paper text puts it (row, column, improvement)."""

from __future__ import annotations

import re

import pytest

from contrastlab.paths import shared_dir
from contrastlab.tables import TABLES, load_published
from contrastlab.tables.published import load_meta
from contrastlab.tables.verify import parse_cells, verify_transcription

QUOTES = str.maketrans("“”’", '""\'')


def papers_dir():
    shared = shared_dir()
    if shared is None or not (shared / "papers").is_dir():
        pytest.skip("../shared/papers is absent (set CONTRASTLAB_SHARED to check the transcription)")
    return shared / "papers"


@pytest.mark.parametrize("name", list(TABLES))
def test_transcription_matches_paper(name):
    paper = papers_dir() / load_meta(name)["paper"]["file"]
    if not paper.is_file():  # a clone holding some papers' text only (docs/adding-a-paper.md)
        pytest.skip(f"{paper} is absent (add the paper's text to check its transcription)")
    assert verify_transcription(name, paper.parent) == []
    # the caption a table page quotes as the paper's is the paper's, spaces, $ and curly quotes aside
    caption = re.sub(r"[\s$]", "", load_meta(name)["caption"]).translate(QUOTES)
    assert caption in re.sub(r"[\s$]", "", paper.read_text()).translate(QUOTES), f"{name}: not its caption"


def test_a_paper_without_its_text_is_skipped(tmp_path, monkeypatch):
    (tmp_path / "papers").mkdir()
    monkeypatch.setenv("CONTRASTLAB_SHARED", str(tmp_path))
    with pytest.raises(pytest.skip.Exception, match="nie2023-.* is absent"):
        test_transcription_matches_paper("nie2023_table1")


def test_a_wrong_or_missing_number_is_caught():
    published = load_published("li2024_table3")
    published.loc[published.index[3], "value"] += 0.01
    published.loc[published.index[-1], "improvement"] = 1.0
    problems = verify_transcription("li2024_table3", papers_dir(), published=published)
    assert len(problems) == 2, problems
    published = load_published("macl_tableB4").iloc[:-1]
    problems = verify_transcription("macl_tableB4", papers_dir(), published=published)
    assert any("missing from the transcription" in p for p in problems)


@pytest.mark.parametrize("name", list(TABLES))
def test_source_note(name):
    meta = load_meta(name)
    assert meta["name"] == name and meta["experiment"] == TABLES[name].experiment
    assert meta["paper"]["file"] and meta["paper"]["table"].startswith("Table") and meta["caption"]
    assert "mapping" in meta and "footnotes" in meta


def test_parse_cells():
    assert parse_cells("71.48+18.2 79.42- 0.1 - 77.25") == [
        (71.48, 18.2, ""),
        (79.42, -0.1, ""),
        (None, None, ""),
        (77.25, None, ""),
    ]
    assert parse_cells("\t0.30 - 1.75") == [(0.3, None, ""), (None, None, ""), (1.75, None, "")]
    assert parse_cells("\t$0.15\\pi$\t0.13π\t1e-5\t-*") == [
        (0.15, None, "pi"),
        (0.13, None, "pi"),
        (1e-5, None, ""),
        (None, None, "*"),
    ]
    assert parse_cells("<b>82.78</b> (+0.36)\t67.16 (-1.24)") == [(82.78, 0.36, ""), (67.16, -1.24, "")]


def test_macl_table9_repeats_table_b3_linear_accuracies():
    # Table 9 (main text) prints only the linear accuracies; they must equal Table B.3's first numbers.
    lines = (papers_dir() / "huang2023-macl-model-aware-contrastive-ICML.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Table 9. **Comparison"))
    rows = {"NT-Xent": "ntxent", "FlatNCE": "flatnce", "DCL": "dcl", "Dual": "dual", "<b>MACL</b>": "macl"}
    published = load_published("macl_table9").set_index(["method", "key"])["value"]
    found = 0
    for line in lines[start : start + 12]:
        label, _, rest = line.partition("\t")
        if label in rows:
            values = [value for value, _, _ in parse_cells(rest)]
            batches = (64, 128, 256, 512, 1024)
            assert values == [published[(f"{rows[label]}-bs{b}", "linear_top1")] for b in batches], label
            found += 1
    assert found == 5
