"""docs/own-loss.md's two examples, taken from the page word for word: the user's loss added as a method of
Nie's and MACL's experiments, and the experiment template naming four protocols, each load and plan on
config.yaml and on the demo; the loss joins no search it is not named in."""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from contrastlab import config as cl_config
from contrastlab import search as cl_search
from contrastlab.paths import REPO_ROOT
from contrastlab.tables.comparison import comparison_tables
from tests.config.test_refused_at_validation import refused


def doc_examples() -> tuple[dict, dict]:
    """The two YAML blocks of docs/own-loss.md, in the page's order: the methods added to the papers'
    experiments, and the template."""
    text = (REPO_ROOT / "docs" / "own-loss.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```yaml\n(.*?)\n```", text, flags=re.M | re.S)
    assert len(blocks) == 2, blocks
    return yaml.safe_load(blocks[0]), yaml.safe_load(blocks[1])


def with_methods_added(config: dict, example: dict) -> dict:
    """``config`` with the first example's new methods added to its experiments ("Add it as a method"); the
    trimmed lines that repeat a paper's own method (``cl``, ``ntxent``) are the page's context, not new."""
    config = copy.deepcopy(config)
    for name, experiment in example["experiments"].items():
        methods = config["experiments"][name]["methods"]
        methods.update({m: spec for m, spec in experiment["methods"].items() if m not in methods})
    return config


def with_template(config: dict, example: dict) -> dict:
    config = copy.deepcopy(config)
    config["methods"] = example["methods"]
    config["experiments"].update({k: v for k, v in example["experiments"].items() if k == "mine"})
    return config


def _read(name: str) -> dict:
    return yaml.safe_load((REPO_ROOT / name).read_text(encoding="utf-8"))


@pytest.fixture
def at_root(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)  # the example's file path is relative to where the workflow runs


@pytest.mark.parametrize("preset", ["config.yaml", "config/demo.yaml"])
@pytest.mark.parametrize("route", ["method", "template"])
def test_each_example_loads_and_plans_without_joining_a_search(at_root, preset, route):
    """Each example loads on config.yaml and the demo and joins no search whose axes its loss lacks."""
    added, template = doc_examples()
    raw = _read(preset)
    config = with_methods_added(raw, added) if route == "method" else with_template(raw, template)
    config = cl_config.validate(config)
    grid = cl_config.Grid(config)
    mine = [c.path for c in grid.every_cell() if c.method.startswith("margin_nce")]
    experiments = {path.split("/")[0] for path in mine}
    protocols = template["experiments"]["mine"]["protocols"]
    assert experiments == ({"nie2023", "macl_cifar10"} if route == "method" else set(protocols))
    points = cl_search.search_points(grid)
    assert points and not [p for p in points if p.method == "margin_nce"]
    # the searches plan exactly the points they did without the loss
    plain = cl_search.search_points(cl_config.Grid(cl_config.validate(raw)))
    assert [p.name for p in points] == [p.name for p in plain]
    # and the loss reaches a table: a comparison table per protocol it joins, and the summary
    assert comparison_tables(grid) == [f"compare_{e}" for e in config["experiments"] if e in experiments] + [
        "compare_summary"
    ]


def test_a_user_loss_named_in_a_search_is_checked_against_its_axes(at_root):
    """A user loss in Li's demo search (stage 2 over hp.r) is refused at load, naming method, axis and fix."""
    _, template = doc_examples()
    config = with_template(_read("config/demo.yaml"), template)
    config["experiments"]["li2024"]["search"]["methods"].append("margin_nce")
    assert refused(cl_config.validate, config) == (
        "config key experiments.li2024.search.stages[1].hp.r: method 'margin_nce' (loss "
        "'examples/margin_infonce.py:margin_infonce') has no hyperparameter 'r'; it takes tau, m. Give "
        "'margin_nce' stages of its own (per_method.margin_nce) or leave it out of the search's methods"
    )


def test_the_pages_python_block_is_a_loss_file_as_it_stands(tmp_path):
    """The page's Python block, in a file of its own, passes the load-time check: imports included."""
    from contrastlab.losses.checks import check_user_loss

    text = (REPO_ROOT / "docs" / "own-loss.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"^```python\n(.*?)\n```", text, flags=re.M | re.S)
    module = tmp_path / "mine.py"
    module.write_text(block, encoding="utf-8")
    check_user_loss(f"{module}:margin_infonce", {"tau": 0.05, "m": 0.1})


def test_the_page_sizes_the_end_to_end_test_as_it_runs(tmp_path):
    """The page's last paragraph says how long tests/e2e/test_user_loss.py trains each protocol."""
    from tests.e2e.test_user_loss import demo_with_user_loss

    config = demo_with_user_loss(tmp_path, "examples/margin_infonce.py:margin_infonce")
    sentence, image = config["training"], config["experiments"]["macl_cifar10"]["training"]
    text = " ".join((REPO_ROOT / "docs" / "own-loss.md").read_text(encoding="utf-8").split())
    assert f"{sentence['max_steps']} steps and {image['max_steps']} image steps" in text
