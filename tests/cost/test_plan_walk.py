"""The walk a reader takes through ``make_plan``, following each function the first time it is called
(a profile hook notes the module after every first call and return): it stays inside ``cost/`` and never
climbs from a lower import-linter layer to a higher one. ``config``, ``paths``, ``families`` and ``papers``
are its vocabulary, not rooms; a *return* is a step into a room already left.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import tomllib
from collections import Counter

import pytest

import contrastlab
from contrastlab import config as cl_config
from contrastlab.cost import backbones, budget, cards, plan
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import flops as cl_flops
from contrastlab.paths import REPO_ROOT

LAYERS = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0][
    "layers"
]


def _layer(module: str) -> int:
    package = module.split(".")[1]
    for depth, names in enumerate(LAYERS):
        if package in (name.strip() for name in names.split("|")):
            return len(LAYERS) - depth
    raise AssertionError(f"{module} is in no layer")


def _room(frame) -> str | None:
    module = frame.f_globals.get("__name__", "") if frame is not None else ""
    vocabulary = ("contrastlab.config", "contrastlab.paths", "contrastlab.families", "contrastlab.papers")
    return module if module.startswith("contrastlab.") and not module.startswith(vocabulary) else None


def _cold() -> None:
    """Every contrastlab module imported (the walk reads no import) and every cache emptied (a cached
    answer would hide the function behind it)."""
    for info in pkgutil.walk_packages(contrastlab.__path__, "contrastlab."):
        module = importlib.import_module(info.name)
        for value in list(vars(module).values()):
            if (
                callable(getattr(value, "cache_clear", None))
                and getattr(value, "__module__", "") == info.name
            ):
                value.cache_clear()


def walk(function, *args, **kwargs) -> list[str]:
    """The rooms a reader of ``function(*args, **kwargs)`` stands in, in order (one entry per stay)."""
    _cold()
    read: set = set()
    skipping: list = []  # the frame of a function already read, while it runs
    stays: list[str] = []

    def note(room: str | None) -> None:
        if room is not None and (not stays or stays[-1] != room):
            stays.append(room)

    def hook(frame, event, _):
        if event == "call" and not skipping:
            code = frame.f_code
            if _room(frame) is None or (code.co_name.startswith("<") and code.co_name != "<lambda>"):
                return
            key = (code.co_filename, code.co_firstlineno)
            if key in read:
                skipping.append(frame)
                return
            read.add(key)
            note(_room(frame))
        elif event == "return":
            if skipping:
                if skipping[-1] is frame:
                    skipping.pop()
                return
            if _room(frame) is not None:
                note(_room(frame.f_back))

    _profiled(hook, function, *args, **kwargs)
    return stays


def _profiled(hook, function, *args, **kwargs) -> None:
    """``function(*args, **kwargs)`` with ``hook`` as the profile function while it runs."""
    sys.setprofile(hook)
    try:
        function(*args, **kwargs)
    finally:
        sys.setprofile(None)


@pytest.mark.parametrize("preset", ["config.yaml", "config/demo.yaml"])
def test_make_plan_stays_in_cost_and_never_climbs_back_up(preset):
    grid = cl_config.Grid(cl_config.load(REPO_ROOT / preset))
    calibration = cl_calibration.load_calibration(cl_calibration.DEFAULT_CALIBRATION)
    points = budget.searched_points(grid, calibration, pins={})  # the entry point prices the searches
    stays = walk(plan.make_plan, grid, calibration, points=points)
    assert stays[0] == "contrastlab.cost.plan" and len(stays) > 5
    climbs = [(a, b) for a, b in zip(stays, stays[1:], strict=False) if _layer(b) > _layer(a)]
    assert climbs == [], climbs
    assert {room.split(".")[1] for room in stays} == {"cost"}


def test_the_walk_sees_a_climb_where_there_is_one():
    """The measure itself: a cost function that asks search.py and goes on in cost/ climbs once."""
    grid = cl_config.Grid(cl_config.load(REPO_ROOT / "config" / "demo.yaml"))
    calibration = cl_calibration.load_calibration(cl_calibration.DEFAULT_CALIBRATION)
    stays = walk(budget.searched_points, grid, calibration, pins={})
    # (search.py checks each point's hyperparameters in losses.catalog before the walk returns to cost/)
    assert stays[:2] == ["contrastlab.cost.budget", "contrastlab.search"], stays
    assert "contrastlab.cost.budget" in stays[2:], stays


def _calls(function, *args, **kwargs) -> list[tuple[str, dict]]:
    """The name and arguments of each call to ``backbone_transformer``, ``native_bf16`` and ``cell_work``
    made while ``function`` runs, in order (whatever name a module imported them under)."""
    watched = {
        f.__code__: f.__name__
        for f in (backbones.backbone_transformer, cards.native_bf16, cl_flops.cell_work)
    }
    calls: list = []

    def hook(frame, event, _):
        if event == "call" and frame.f_code in watched:
            calls.append((watched[frame.f_code], dict(frame.f_locals)))

    _profiled(hook, function, *args, **kwargs)
    return calls


def test_the_plan_resolves_each_backbone_and_the_card_once_and_prices_each_cell_once(tmp_path):
    """The plan resolves each sentence backbone and the card once, and calls ``cell_work`` once per cell
    and precision choice, however many parts of the plan read a cell."""
    config = cl_config.load(REPO_ROOT / "config" / "demo.yaml")
    grid = cl_config.Grid(config)
    calibration = cl_calibration.load_calibration(cl_calibration.DEFAULT_CALIBRATION)
    points = budget.plan_points(grid, calibration)
    calls = _calls(plan.make_plan, grid, calibration, points=points)
    cells = [*grid.cells, *(p.cell for p in points)]
    sentence = {c.backbone for c in cells if grid.experiment(c.experiment).track != "vision"}
    resolved = [local["alias"] for name, local in calls if name == "backbone_transformer"]
    assert len(sentence) > 1 and sorted(resolved) == sorted(sentence | {b for b, _ in grid.pretrained})
    assert [name for name, _ in calls].count("native_bf16") == 1
    calls = _calls(plan.plan_report, config, out_dir=tmp_path, echo=False)
    priced = Counter(
        local["cell"].path for name, local in calls if name == "cell_work" and local["point"] is None
    )
    assert priced == dict.fromkeys((c.path for c in grid.cells), len(plan.SIDE_BY_SIDE) + 1)
