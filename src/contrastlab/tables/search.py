"""The searches' selected hyperparameters beside the published ones (Nie Table 2, Li Tables 6–7).

For every experiment with a ``search`` (:mod:`contrastlab.search`) that runs with the default target,
``search_<experiment>`` lists, per searched backbone, method and setting: the values tried, the one
selected on dev (read from ``<results_dir>/search/<experiment>/<backbone>/<method>/stage<k>.json``), the
configured and the published value, and a verdict: **same as published**, **same within dev noise**
(the published value's point scored within t_{ν, 0.975} · s · √2 of the winner, s the pooled seed std
of the experiment's cells on the backbone), **differs**, **published off grid** (the search cannot
select it), **not in paper** or **not run**. Values in units of π print with the unit.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from contrastlab import config as cl_config
from contrastlab import search as cl_search
from contrastlab.blocks import Heading, Paragraph, Verdict, literals_of, rows_table, to_markdown
from contrastlab.paths import Results, write_text
from contrastlab.stats import half_width
from contrastlab.tables.latex import latex_table
from contrastlab.tables.published import TABLES, load_published

SAME, DIFFERS, NOT_IN_PAPER, NOT_RUN = "same as published", "differs", "not in paper", "not run"
SAME_NOISE, OFF_GRID = "same within dev noise", "published off grid"
#: The dev gap column: published point − stage winner on dev ± the dev noise (see the module docstring).
DEV_GAP = "published − winner (dev)"
COLUMNS = [
    "backbone",
    "method",
    "setting",
    "tried",
    "selected",
    "configured",
    "published",
    DEV_GAP,
    "verdict",
]
#: How a published unit prints after its value.
UNIT_SYMBOLS = {"pi": "π"}


def search_experiments(grid: cl_config.Grid) -> list[str]:
    """Selected experiments whose search runs with the default target (``searches.in_all``)."""
    if not grid.options.searches_in_all:
        return []
    return [name for name, exp in grid.experiments.items() if exp.get("search")]


def search_tables(grid: cl_config.Grid) -> list[str]:
    """Names of the search tables a config produces (``search_<experiment>``)."""
    return [f"search_{name}" for name in search_experiments(grid)]


def _published_rows(experiment: str, backbone: str, method: str):
    """(setting, value, unit) of ``method`` on ``backbone`` in the paper's hyperparameter tables of
    ``experiment``: settings ``lr``, ``batch_size`` and ``hp.<name>``; unit ``"pi"`` for L_mat's m."""
    for spec in TABLES.values():
        if spec.experiment == experiment and spec.kind == "hparams":
            table = load_published(spec.name)
            rows = table[(table["backbone"] == backbone) & (table["method"] == method)]
            for key, value, unit in zip(rows["key"], rows["value"], rows["unit"], strict=True):
                yield (key if key in ("lr", "batch_size") else f"hp.{key}"), value, unit


def published_hparams(experiment: str, backbone: str, method: str) -> dict[str, float]:
    """setting -> published value of ``method`` on ``backbone`` (:func:`_published_rows`; NaN left out)."""
    return {
        key: float(value)
        for key, value, _ in _published_rows(experiment, backbone, method)
        if not math.isnan(value)
    }


def dev_noise(
    metrics, experiment: str, backbone: str, seeds: Sequence[int] | None = None
) -> tuple[float, int]:
    """Half-width of the dev difference of two single-seed points, t_{ν, 0.975} · s · √2, and ν: s the
    pooled seed std of the best STS-B dev Spearman over the experiment's cells on ``backbone``
    (:func:`~contrastlab.tables.verdicts.noise_pools`); ``(nan, 0)`` without two seeds of any cell."""
    # pandas: this module is read at the workflow's parse (rules/common.smk), the noise only by a job
    from contrastlab.tables.metrics import DEV_SPEARMAN
    from contrastlab.tables.verdicts import noise_pools

    if metrics is None or len(metrics) == 0:
        return math.nan, 0
    pools = noise_pools(metrics, experiment, list(seeds) if seeds else None)
    row = pools[(pools["backbone"] == backbone) & (pools["key"] == DEV_SPEARMAN)]
    if row.empty or not int(row["noise_df"].iloc[0]):
        return math.nan, 0
    std, df = float(row["noise_std"].iloc[0]), int(row["noise_df"].iloc[0])
    return half_width(std, df, n=1, k=1), df


def off_grid(stages: Sequence[Mapping[str, Any]], axis: str, value: float | None) -> bool:
    """Whether a published ``value`` of ``axis`` lies outside every grid that searches the axis (a
    relative ``around`` axis has no fixed grid: never off it).

    >>> off_grid([{"grid": {"lr": [1e-5]}}, {"grid": {"hp.tau": [0.03, 0.05, 0.07]}}], "hp.tau", 0.01)
    True
    """
    grids = [st["grid"][axis] for st in stages if axis in (st.get("grid") or {})]
    if value is None or not grids:
        return False
    return not any(_close(v, value) for grid in grids for v in grid)


def stage_axes(stage: Mapping[str, Any]) -> list[str]:
    """The settings a search stage varies: its ``grid`` axes, then its ``around`` (relative) ones."""
    return [*(stage.get("grid") or {}), *(stage.get("around") or {})]


def _published_point(selection: Mapping[str, Any], stage: Mapping[str, Any], axis: str, published: dict):
    """The point of a stage selection at the published value of ``axis`` (see the module docstring)."""
    winner = selection.get("winner_settings") or {}
    target = {}
    for a in stage_axes(stage):
        grid = (stage.get("grid") or {}).get(a) or []
        on_grid = a in published and any(_close(v, published[a]) for v in grid)
        target[a] = published[a] if a == axis or on_grid else cl_config.setting_value(winner, a)
    for point in selection.get("points") or []:
        settings = point.get("settings") or {}
        if all(_close(cl_config.setting_value(settings, a), v) for a, v in target.items()):
            return point
    return None


def _selections(results_dir: str | Path | None, experiment: str, backbone: str, method: str) -> list[dict]:
    if results_dir is None:
        return []
    folder = Path(Results(results_dir).search_stage(experiment, backbone, method, 1)).parent
    files = sorted(folder.glob("stage*.json"), key=lambda p: int(p.stem.removeprefix("stage")))
    return [json.loads(p.read_text(encoding="utf-8")) for p in files]


def _fmt(value: Any, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return (f"{value:g}" if isinstance(value, float) else str(value)) + UNIT_SYMBOLS.get(unit, unit)


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def selection_rows(
    grid: cl_config.Grid, results_dir: str | Path | None, experiment: str, metrics=None
) -> list[dict]:
    """One row per (backbone, method, searched setting) of the experiment's search (:data:`COLUMNS`, and
    ``winner_dev``, ``published_dev``, ``dev_noise``, ``off_grid`` for the CSV; ``badge``: the verdict as
    the page shows it, a :class:`~contrastlab.blocks.Verdict` of its kind); ``metrics`` (the
    collected metrics frame) gives the dev noise of "same within dev noise" (module docstring)."""
    spec = grid.experiment(experiment).search
    if spec is None:
        return []
    seeds = grid.experiment(experiment).seeds
    searched = cl_search.searched_methods(grid, experiment)
    rows = []
    for backbone in spec["backbones"]:
        noise, _ = dev_noise(metrics, experiment, backbone, seeds)
        for method in spec["methods"]:
            if backbone not in searched.get(method, []):
                continue
            stages = spec["stages"][method]
            axes = list(dict.fromkeys(a for st in stages for a in stage_axes(st)))
            selections = _selections(results_dir, experiment, backbone, method)
            done = len(selections) == len(stages)
            winner = selections[-1]["winner_settings"] if done else None
            configured = grid.settings(cl_config.MethodOn(experiment, backbone, method))
            published = published_hparams(experiment, backbone, method)
            units = {key: unit for key, _, unit in _published_rows(experiment, backbone, method) if unit}
            for axis in axes:
                unit = units.get(axis, "")
                tried = sorted(
                    {cl_config.setting_value(p["settings"], axis) for s in selections for p in s["points"]}
                    - {None},
                    key=lambda v: (str(type(v)), v),
                )
                if not tried:
                    tried = [v for st in stages for v in (st.get("grid") or {}).get(axis, [])]
                selected = cl_config.setting_value(winner, axis) if winner else None
                paper = published.get(axis)
                outside = off_grid(stages, axis, paper)
                gap = math.nan
                if done and paper is not None and not outside:
                    k = max(i for i, st in enumerate(stages) if axis in stage_axes(st))
                    point = _published_point(selections[k], stages[k], axis, published)
                    dev, best = (point or {}).get("dev"), selections[k].get("winner_dev")
                    if isinstance(dev, int | float) and isinstance(best, int | float):
                        gap = float(dev) - float(best)
                if winner is None:
                    verdict = Verdict("not-run", NOT_RUN)
                elif paper is None:
                    verdict = Verdict("not-run", NOT_IN_PAPER)
                elif outside:
                    verdict = Verdict("off-grid", OFF_GRID)
                elif _close(selected, paper):
                    verdict = Verdict("same", SAME)
                elif not math.isnan(gap) and not math.isnan(noise) and -gap <= noise:
                    verdict = Verdict("same", SAME_NOISE)
                else:
                    verdict = Verdict("differs", DIFFERS)
                rows.append(
                    {
                        "backbone": backbone,
                        "method": method,
                        "setting": axis,
                        "tried": ", ".join(_fmt(v, unit) for v in tried),
                        "selected": _fmt(selected, unit),
                        "configured": _fmt(cl_config.setting_value(configured, axis), unit),
                        "published": _fmt(paper, unit) + (" (off grid)" if outside else ""),
                        DEV_GAP: "—"
                        if math.isnan(gap)
                        else f"{gap:+.2f}" + ("" if math.isnan(noise) else f" (noise ± {noise:.2f})"),
                        "verdict": verdict.word,
                        "badge": verdict,
                        "winner_dev": selections[-1]["winner_dev"] if done else None,
                        "published_dev_gap": gap,
                        "dev_noise": noise,
                        "off_grid": outside,
                    }
                )
    return rows


def write_search_tables(
    grid: cl_config.Grid,
    results_dir: str | Path | None,
    out_dir: str | Path,
    names: Sequence[str],
    metrics=None,
) -> tuple[list[Path], dict[str, list]]:
    """Write ``<name>.csv/.md/.tex`` for each search table in ``names``; returns the paths and, per
    experiment, the report's blocks. ``metrics``: the collected metrics (the dev noise)."""
    import pandas as pd

    out_dir = Path(out_dir)
    written, sections = [], {}
    extra = ["winner_dev", "published_dev_gap", "dev_noise", "off_grid"]
    for name in names:
        experiment = name.removeprefix("search_")
        rows = selection_rows(grid, results_dir, experiment, metrics)
        frame = pd.DataFrame(rows, columns=[*COLUMNS, *extra])
        shown = [{c: r["badge"] if c == "verdict" else r[c] for c in COLUMNS} for r in rows]
        paths = {ext: out_dir / f"{name}.{ext}" for ext in ("csv", "md", "tex")}
        write_text(paths["csv"], frame.to_csv(index=False))  # atomically (paths.atomic_write)
        table = rows_table(shown) if shown else Paragraph("(no searched setting)")
        title = f"Search of {experiment}: selected on dev beside the published hyperparameters"
        write_text(paths["md"], to_markdown([Heading(1, title), table], literals_of(grid.config)))
        body = [[r[c] for c in COLUMNS] for r in rows]
        write_text(paths["tex"], latex_table(name, "l" * len(COLUMNS), [COLUMNS], body, title))
        written += paths.values()
        count = {v: sum(r["verdict"] == v for r in rows) for v in (SAME, SAME_NOISE, DIFFERS, OFF_GRID)}
        sections[experiment] = [
            Heading(4, title),
            Paragraph(
                "Each point trained as a cell (one seed) and was selected on its best STS-B dev Spearman "
                "(the trainer's dev selection); the test sets scored the winner alone (the “ours, searched” "
                "rows of the paper tables); where the paper chose on another measure, its deviations below "
                f"say so. {count[SAME]} selected settings equal the published ones and {count[SAME_NOISE]} "
                "more match within dev noise (the published value's point within t · s · √2 of its stage's "
                "winner on dev, s the pooled seed std of the dev score over the experiment's cells); "
                f"{count[DIFFERS]} differ; {count[OFF_GRID]} published values lie outside the paper's own "
                "grid and cannot be selected. "
                f"Heatmap: figure `{experiment}/search`. Files: [csv](tables/{name}.csv) · "
                f"[tex](tables/{name}.tex)."
            ),
            table,
        ]
    return written, sections
