"""Hyperparameter searches as ordinary cells, selected on dev only (Nie App. A.3, Li App. A.4); the
``search:`` section and what it writes: docs/reproduction.md, "Hyperparameter searches".

Stage 1's points are known when the workflow starts, so each is an ordinary cell (``<method>~s1-<labels>``);
one whose settings equal a configured cell of the experiment (whatever ``select:`` keeps) *is* that cell
(:attr:`SearchPoint.shared_with`). A stage k > 1 starts from stage k−1's winner (:func:`resolve_settings`):
its points are named in advance, and only their settings wait for the earlier stage, which the training
job reads from that stage's selection file (no Snakemake checkpoint). Selection (:func:`select`) reads each
point's best STS-B dev Spearman from ``train_summary.json`` and nothing else; a diverged point
(:func:`record_diverged`) has no dev score and is passed over.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contrastlab import config as cl_config
from contrastlab.config import apply_overrides, setting_value
from contrastlab.paths import atomic_write, write_json

#: The selection metric of a sentence search (train_summary.json key, the trainer's dev selection).
DEV_METRIC = "best_dev_spearman"
#: Method name of a search's winner, evaluated on the test sets (``<method>~searched``).
SEARCHED = "~searched"


@dataclass(frozen=True)
class SearchPoint:
    """One point of a search: a training cell (or, with ``shared_with``, a configured cell reused)."""

    experiment: str
    backbone: str
    method: str  #: the configured method searched
    stage: int  #: 1-based
    index: int  #: position in the stage's grid (grid order: the first axis varies slowest)
    grid: Mapping[str, Any]  #: absolute values of this point's axes
    around: Mapping[str, tuple[str, float]] = field(default_factory=dict)  #: axis -> (op, value)
    seed: int = 42
    shared_with: str | None = None  #: the configured cell's method name when the settings are equal

    @functools.cached_property
    def name(self) -> str:
        """The cell's method name, ``<method>~s<stage>-<labels>``."""
        labels = [f"{_axis_label(k)}{_number(v)}" for k, v in self.grid.items()]
        for key, (op, value) in self.around.items():
            sign = "" if op == "plus" and value < 0 else cl_config.RELATIVE_OPS[op]
            labels.append(f"{_axis_label(key)}{sign}{_number(value)}")
        return "-".join([f"{self.method}~s{self.stage}", *labels])

    @functools.cached_property
    def trained_as(self) -> str:
        """The method name whose checkpoint holds this point (the shared cell's, or its own)."""
        return self.shared_with or self.name

    @functools.cached_property
    def cell(self) -> cl_config.Cell:
        """The cell that trains this point (the shared configured cell's, or its own)."""
        return cl_config.Cell(self.experiment, self.backbone, self.trained_as, self.seed)

    @functools.cached_property
    def winner_cell(self) -> cl_config.Cell:
        """The cell under which the search of this point evaluates its winner (``<method>~searched``)."""
        return cl_config.Cell(self.experiment, self.backbone, searched_method(self.method), self.seed)

    @property
    def key(self) -> tuple[str, str, str]:
        """(experiment, backbone, method) of the search this point belongs to."""
        return self.experiment, self.backbone, self.method


def _axis_label(key: str) -> str:
    return cl_config.SWEEP_LABELS.get(key, key.removeprefix("hp."))


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def searched_method(method: str) -> str:
    """The method name of a search's evaluated winner (``mpt`` -> ``mpt~searched``)."""
    return f"{method}{SEARCHED}"


def stage_points(stage: Mapping[str, Any]) -> list[tuple[dict[str, Any], dict[str, tuple[str, float]]]]:
    """The (grid values, relative moves) of every point of a stage, in grid order (first axis slowest).

    >>> stage_points({"grid": {"lr": [1e-5, 3e-5]}, "around": {"hp.m": {"plus": [-0.01, 0.01]}}})
    [({'lr': 1e-05}, {'hp.m': ('plus', -0.01)}), ({'lr': 1e-05}, {'hp.m': ('plus', 0.01)}), \
({'lr': 3e-05}, {'hp.m': ('plus', -0.01)}), ({'lr': 3e-05}, {'hp.m': ('plus', 0.01)})]
    """
    grid = dict(stage.get("grid") or {})
    around = {axis: next(iter(rel.items())) for axis, rel in (stage.get("around") or {}).items()}
    axes = [grid[a] for a in grid] + [[(op, v) for v in values] for op, values in around.values()]
    n = len(grid)
    return [
        (dict(zip(grid, combo[:n], strict=True)), dict(zip(around, combo[n:], strict=True)))
        for combo in itertools.product(*axes)
    ]


def search_points(grid: cl_config.Grid) -> list[SearchPoint]:
    """Every point of every selected experiment's search, search by search, stage by stage, in grid
    order; a stage-1 point equal to a configured cell (selected or not) names it in ``shared_with``."""
    out = []
    for experiment in grid.experiments:
        spec = grid.experiment(experiment).search
        if spec is None:
            continue
        for backbone, method in itertools.product(spec["backbones"], spec["methods"]):
            if not grid.experiment(experiment).method_has_backbone(method, backbone):
                continue
            # every configured cell, whatever select: keeps: a select that leaves the twin out (the
            # report's add-seeds lines pick other methods and seeds) must not train its point again
            twins = [
                (c.method, grid.settings(c))
                for c in grid.experiment(experiment).cells
                if (c.backbone, c.seed) == (backbone, spec["seed"])
            ]
            for k, stage in enumerate(spec["stages"][method], start=1):
                for index, (values, around) in enumerate(stage_points(stage)):
                    point = SearchPoint(experiment, backbone, method, k, index, values, around, spec["seed"])
                    if k == 1:
                        settings = point_settings(grid, point)
                        shared = next((m for m, s in twins if s == settings), None)
                        point = dataclasses.replace(point, shared_with=shared)
                    # named now, once: the budget, the plan and the rules read them often
                    _ = point.cell, point.winner_cell
                    out.append(point)
    return out


def point_settings(grid: cl_config.Grid, point: SearchPoint) -> dict:
    """The settings known before the search runs: the method's configured settings with the point's
    grid values (all of a stage-1 point's; a later stage's are completed by :func:`resolve_settings`)."""
    return apply_overrides(grid.settings(point), point.grid)


def resolve_settings(
    winner_settings: Mapping[str, Any],
    grid: Mapping[str, Any],
    around: Mapping[str, tuple[str, float]],
) -> dict:
    """The settings of a stage-k point (k > 1): the earlier stage's winner's settings, with the stage's
    ``grid`` values set and its ``around`` moves applied to the winner's values (``times``: ×,
    ``plus``: +; rounded to 12 significant digits so that 3e-5 × 2 is 6e-5). A batch size stays an int.

    >>> w = {"lr": 3e-5, "batch_size": 64, "loss_hp": {"m": 0.3, "tau": 0.05}}
    >>> resolve_settings(w, {"hp.tau": 0.01}, {"lr": ("times", 2), "hp.m": ("plus", -0.03)})
    {'lr': 6e-05, 'batch_size': 64, 'loss_hp': {'m': 0.27, 'tau': 0.01}}
    """
    moved = {}
    for key, (op, amount) in around.items():
        base = setting_value(winner_settings, key)
        if not isinstance(base, int | float):
            raise ValueError(f"search: the winner has no numeric {key} to move ({base!r})")
        value = base * amount if op == "times" else base + amount
        value = float(f"{value:.12g}")
        moved[key] = int(round(value)) if isinstance(base, int) and not isinstance(base, bool) else value
    return apply_overrides(winner_settings, {**grid, **moved})


def resolve_point(settings: Mapping[str, Any], previous_selection: str | Path, point: SearchPoint) -> dict:
    """The full settings of a later-stage point at training time: :func:`resolve_settings` from the
    winner recorded in the earlier stage's selection file, with the point's grid values and moves and
    this cell's seed (``settings``: the ones known before, :func:`point_settings`)."""
    selection = json.loads(Path(previous_selection).read_text(encoding="utf-8"))
    resolved = resolve_settings(selection["winner_settings"], point.grid, point.around)
    resolved["seed"] = settings["seed"]
    return resolved


def same_as_winner(resolved: Mapping[str, Any], previous_selection: str | Path) -> str | None:
    """The earlier winner's checkpoint folder when a later-stage point's resolved settings equal the
    winner's (Li A.4's second grid contains the first grid's point: it is not trained twice), else None."""
    selection = json.loads(Path(previous_selection).read_text(encoding="utf-8"))
    return selection["winner_model"] if dict(resolved) == selection["winner_settings"] else None


#: What a point whose training diverged leaves in its checkpoint (or encoder) folder instead of a model:
#: the error and the settings (:func:`record_diverged`).
DIVERGED_FILE = "diverged.json"


def record_diverged(
    out_dir: str | Path, log_path: str | Path, settings: Mapping[str, Any], error: str
) -> None:
    """Write what a point (of a search or a sweep) whose training diverged leaves instead of a model:
    ``<out_dir>/diverged.json`` (the error and the settings) and a one-line log, each atomically.

    A divergence is a result of the grid (a learning rate too large; OAR Fig. 2's rates reach 1), not a
    fault to retry, so the point is finished and the run goes on: selection passes it over
    (:func:`read_point` gives it no dev score), the image evaluation records it
    (:func:`contrastlab.evaluation.vision.diverged_encoder_metrics`) and the figures mark it."""
    write_json(Path(out_dir) / DIVERGED_FILE, {"diverged": error, "settings": dict(settings)})
    with atomic_write(log_path) as tmp:
        tmp.write_text(json.dumps({"event": "diverged", "error": error}) + "\n", encoding="utf-8")


def diverged_record(out_dir: str | Path) -> dict[str, Any] | None:
    """What :func:`record_diverged` wrote in ``out_dir`` (``diverged``: the error, ``settings``), or None
    for a trained model."""
    path = Path(out_dir) / DIVERGED_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def diverged_reason(out_dir: str | Path) -> str | None:
    """The error :func:`record_diverged` recorded in ``out_dir``, or None for a trained model."""
    return (diverged_record(out_dir) or {}).get("diverged")


def read_point(model_dir: str | Path) -> dict[str, Any]:
    """What selection may read of one trained point: its dev score (:data:`DEV_METRIC`), dev step and
    settings, from ``<model_dir>/train_summary.json`` (never a test score); a point whose training
    diverged (:func:`record_diverged`) has no dev score, its settings and the error."""
    summary = diverged_record(model_dir)
    if summary is None:
        summary = json.loads((Path(model_dir) / "train_summary.json").read_text(encoding="utf-8"))
    return {
        "dev": summary.get(DEV_METRIC),
        "dev_task": summary.get("dev_task"),
        "best_step": summary.get("best_step"),
        "settings": summary.get("settings") or {},
        "model_dir": str(model_dir),
        "diverged": summary.get("diverged"),
    }


def select(points: Sequence[Mapping[str, Any]]) -> int:
    """Index of the winner among ``points`` (each with a ``dev`` score): the highest finite dev score,
    the first in grid order on a tie. Raises ValueError when no point has a finite score."""
    scored = [
        i for i, p in enumerate(points) if isinstance(p.get("dev"), int | float) and math.isfinite(p["dev"])
    ]
    if not scored:
        raise ValueError("search: no point of the stage has a finite dev score; nothing to select")
    return max(scored, key=lambda i: (points[i]["dev"], -i))


def stage_selection(points: Sequence[SearchPoint], model_dirs: Sequence[str | Path]) -> dict[str, Any]:
    """The selection record of one stage of one search (written as ``stage<k>.json``): every point's
    name, axes, settings and dev score, and the winner (:func:`select`)."""
    if not points:
        raise ValueError("search: a stage without points")
    rows = [
        {
            "name": point.name,
            "index": point.index,
            "grid": dict(point.grid),
            "around": {k: list(v) for k, v in point.around.items()},
            "shared_with": point.shared_with,
            **read_point(model_dir),
        }
        for point, model_dir in zip(points, model_dirs, strict=True)
    ]
    first = points[0]
    winner = select(rows)
    return {
        "experiment": first.experiment,
        "backbone": first.backbone,
        "method": first.method,
        "stage": first.stage,
        "seed": first.seed,
        "metric": f"{rows[winner]['dev_task'] or 'STS-B'} dev Spearman ({DEV_METRIC})",
        "points": rows,
        "winner": rows[winner]["name"],
        "winner_settings": rows[winner]["settings"],
        "winner_model": rows[winner]["model_dir"],
        "winner_dev": rows[winner]["dev"],
    }


def searches(points: Iterable[SearchPoint]) -> dict[tuple[str, str, str], dict[int, list[SearchPoint]]]:
    """Points grouped by search (experiment, backbone, method) and stage, in order."""
    out: dict[tuple[str, str, str], dict[int, list[SearchPoint]]] = {}
    for point in points:
        out.setdefault(point.key, {}).setdefault(point.stage, []).append(point)
    return out


def searched_methods(grid: cl_config.Grid, experiment: str) -> dict[str, list[str]]:
    """method -> backbones of the experiment's search (empty without one): where the paper tables get
    an "ours, searched" row."""
    spec = grid.experiment(experiment).search if experiment in grid.every_experiment else None
    if spec is None:
        return {}
    return {
        m: [b for b in spec["backbones"] if grid.experiment(experiment).method_has_backbone(m, b)]
        for m in spec["methods"]
    }
