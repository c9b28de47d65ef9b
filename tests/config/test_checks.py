"""``select`` typos are config errors naming the choices (contrastlab.config.checks); through Snakemake:
tests/e2e/test_overrides.py. MTEB task and benchmark names are checked by mteb's own lookup."""

from __future__ import annotations

import pytest

from contrastlab import config as cl_config
from tests.config.test_refused_at_validation import refused


@pytest.mark.parametrize(
    ("select", "expected"),
    [
        ({"experiments": ["nie"]}, "select.experiments: unknown experiment 'nie'; choose from"),
        ({"methods": ["mptt"]}, "select.methods: unknown method 'mptt'; choose from"),
        ({"backbones": ["bert-large"]}, "select.backbones: unknown backbone 'bert-large'; choose from"),
        ({"seeds": [7]}, "select.seeds: unknown seed 7; choose from"),
        ({"experiments": ["li2024"], "methods": ["cl"]}, "select.methods: unknown method 'cl'"),
        ({"experiments": ["nie2023"], "methods": ["mpt"], "backbones": ["minilm"]}, "selects no cell"),
    ],
)
def test_select_typos_are_config_errors_listing_the_choices(repo_root, select, expected):
    message = refused(cl_config.load, repo_root / "config" / "demo.yaml", {"select": select})
    assert expected in message
    if "choose from" in expected:  # the valid names follow
        assert message.rsplit(": ", 1)[1].strip()


@pytest.mark.parametrize(
    ("mteb", "expected"),
    [
        (
            {"tasks": ["STS99"]},
            "mteb.tasks: unknown MTEB task 'STS99' (mteb's lookup: Did you mean: 'STSB'?)",
        ),
        (
            {"benchmark": "MTEB(foo)"},
            "mteb.benchmark: unknown MTEB benchmark 'MTEB(foo)' (mteb's lookup: Did you mean: JMTEB(v2)?)",
        ),
        (
            {"tasks": ["SciFact"], "benchmark": "MTEB(eng, v2)"},
            "mteb.tasks: set mteb.tasks or mteb.benchmark",
        ),
        ({"data": "standin", "tasks": ["SciFact"]}, "mteb.tasks: needs mteb.data: hub"),
        ({"data": "standin", "benchmark": "MTEB(eng, v2)"}, "mteb.benchmark: needs mteb.data: hub"),
    ],
)
def test_mteb_task_and_benchmark_names_are_checked_by_mtebs_own_lookup(repo_root, mteb, expected):
    """A name mteb.get_task / mteb.get_benchmark does not know: one line naming the key and mteb's hint."""
    pytest.importorskip("mteb")
    message = refused(cl_config.load, repo_root / "config" / "demo.yaml", {"mteb": {"data": "hub", **mteb}})
    assert f"config key {expected}" in message


def test_mteb_selection_is_kept_as_given_and_absent_by_default(repo_root):
    """A known benchmark or task list passes as written; without them the config gets no such key."""
    pytest.importorskip("mteb")
    demo = repo_root / "config" / "demo.yaml"
    assert not {"tasks", "benchmark"} & set(cl_config.load(demo)["mteb"])
    chosen = cl_config.load(demo, {"mteb": {"data": "hub", "benchmark": "MTEB(eng, v2)"}})["mteb"]
    assert (chosen["benchmark"], "tasks" in chosen) == ("MTEB(eng, v2)", False)
    tasks = cl_config.load(demo, {"mteb": {"data": "hub", "tasks": ["SciFact", "BIOSSES"]}})["mteb"]["tasks"]
    assert tasks == ["SciFact", "BIOSSES"]


def test_a_configured_papers_table_without_its_published_numbers_is_a_config_error(
    repo_root, tmp_path, monkeypatch
):
    """A configured experiment's table without its CSV (or sidecar) stops the config's load in one line
    naming the file and the page's step (not the tables job at the end, nor a traceback from make plan)."""
    from contrastlab.config import checks
    from contrastlab.papers import PUBLISHED_DIR

    for path in PUBLISHED_DIR.iterdir():
        if path.name != "oar_table3.csv":
            (tmp_path / path.name).write_bytes(path.read_bytes())
    monkeypatch.setattr(checks, "PUBLISHED_DIR", tmp_path)
    assert refused(cl_config.load, repo_root / "config" / "demo.yaml") == (
        "config key experiments.oar_cifar10: its paper's table oar_table3 needs "
        f"{tmp_path / 'oar_table3.csv'}: write it (docs/adding-a-paper.md, step 2)"
    )
