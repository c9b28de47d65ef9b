"""Where our cells deliberately differ from the authors' setups, per paper, from the config.

One list per experiment: the config's ``experiments.<name>.deviations`` (written by hand: what the
paper did, what we do, and why); those that follow from the config the run used (a
``precision_override``, an evaluation ``mode`` other than ``test`` or ``tasks`` short of the 14, shortened
training, fewer seeds than the paper's runs, backbones the paper does not have); and its search's rows
(:func:`search_rows`). Each table's Markdown and ``report.md`` list them ("none" when empty);
``docs/deviations.md`` is :func:`render_page` of ``config.yaml`` (a test keeps the two equal)::

    python -m contrastlab.tables.deviations config.yaml > docs/deviations.md
"""

from __future__ import annotations

import sys
from typing import Any

from contrastlab import search as cl_search
from contrastlab.blocks import Heading, Paragraph, Table, literals_of, rows_table, to_markdown
from contrastlab.config import Grid, load, setting_value
from contrastlab.senteval.protocol import STS_TASKS, TASKS, TRANSFER_TASKS
from contrastlab.tables.published import TABLES, load_meta, paper_backbones
from contrastlab.tables.search import off_grid, published_hparams, stage_axes

#: Seeds the papers average over ("the average value obtained from three runs").
PAPER_RUNS = 3
PAPER_MODE = "test"


def _training_values(grid: Grid, experiment: str, key: str) -> set:
    """Every value ``key`` takes in the experiment's cells' resolved training settings."""
    return {grid.settings(c).get(key) for c in grid.experiment(experiment).cells}


def detected(grid: Grid, experiment: str) -> list[dict[str, str]]:
    """Deviations that follow from the config itself (see the module docstring)."""
    exp = grid.experiment(experiment).spec
    if exp.get("track") == "vision":
        return _detected_vision(grid, experiment)
    out = _precision_override(grid, "each paper's own (fp32 for Nie and Li, fp16 for SimCSE-based cells)")
    mode = grid.options.evaluation.get("mode", PAPER_MODE)
    if mode != PAPER_MODE:
        out.append(
            _row(
                "evaluation mode",
                "SentEval test mode (10 folds, Adam probe)",
                f"{mode} (5 folds, SimCSE's RMSprop fasttest probe)",
                "a quick preset; transfer accuracies are not comparable to the paper's",
            )
        )
    if missing := [t for t in TASKS if t not in (grid.options.evaluation.get("tasks") or TASKS)]:
        avg = [a for a, g in (("STS.Avg", STS_TASKS), ("TR.Avg", TRANSFER_TASKS)) if set(g) & set(missing)]
        ours = f"{len(TASKS) - len(missing)} of {len(TASKS)}: without {', '.join(missing)}"
        paper = f"the {len(TASKS)} SentEval tasks ({len(STS_TASKS)} STS, {len(TRANSFER_TASKS)} transfer)"
        why = f"a quick preset; the left-out tasks and {' and '.join(avg)} are not evaluated"
        out.append(_row("evaluation tasks", paper, ours, why))
    for key in ("max_steps", "max_sentences"):
        if values := sorted(v for v in _training_values(grid, experiment, key) if v is not None):
            out.append(
                _row(
                    key,
                    "one epoch over 1M Wikipedia sentences",
                    f"{key} = {', '.join(map(str, values))}",
                    "a shortened run (preset); scores are not comparable to the paper's",
                )
            )
    seeds = grid.experiment(experiment).seeds or []
    if len(seeds) < PAPER_RUNS:
        ours = f"{len(seeds)} seed(s): {', '.join(map(str, seeds))}"
        out.append(_row("seeds", f"mean of {PAPER_RUNS} runs", ours, "a preset with fewer runs"))
    out += _extra_backbones(grid, experiment, "offline or small backbones of a preset")
    return out


def _extra_backbones(grid: Grid, experiment: str, why: str) -> list[dict[str, str]]:
    """The backbones the experiment trains that no table of its paper has (no published numbers)."""
    in_paper = paper_backbones(experiment)
    extra = [b for b in grid.experiment(experiment).spec.get("backbones") or [] if b not in in_paper]
    if not extra:
        return []
    ours = f"also {', '.join(extra)} (no published numbers)"
    return [_row("backbones", ", ".join(in_paper), ours, why)]


def _row(setting: str, paper: str, ours: str, why: str) -> dict[str, str]:
    """One deviation: the setting, what the paper did, what we do, and why."""
    return {"setting": setting, "paper": paper, "ours": ours, "why": why}


#: Each vision table's paper schedule (single runs: no seed count to compare), from its paper's record
#: (the tables' ``epochs``, each with the paper's sentence).
VISION_PAPER_EPOCHS = {spec.experiment: spec.epochs for spec in TABLES.values() if spec.epochs}


def _precision_override(grid: Grid, paper: str) -> list[dict[str, str]]:
    """The row of ``precision_override`` (it reaches every cell, sentence and image), if set."""
    override = grid.options.precision_override
    if not override:
        return []
    ours = f"{override} for every cell (precision_override)"
    return [_row("precision", paper, ours, "the speed switch of this run's config")]


def _detected_vision(grid: Grid, experiment: str) -> list[dict[str, str]]:
    """The precision switch, shortened schedules and backbones without published numbers, for a vision
    experiment."""
    out = _precision_override(grid, "each paper's own (the code's: fp32)")
    paper_epochs = VISION_PAPER_EPOCHS.get(experiment, VISION_PAPER_EPOCHS["macl_cifar10"])
    epochs = sorted(v for v in _training_values(grid, experiment, "epochs") if v != paper_epochs)
    steps = sorted(v for v in _training_values(grid, experiment, "max_steps") if v is not None)
    if epochs or steps:
        ours = [f"epochs = {', '.join(map(str, epochs))}"] if epochs else []
        ours += [f"max_steps = {', '.join(map(str, steps))}"] if steps else []
        why = "a shortened run (preset); accuracies are not comparable to the paper's"
        out.append(_row("schedule", f"{paper_epochs} epochs", "; ".join(ours), why))
    return out + _extra_backbones(grid, experiment, "small encoders of a preset")


def _search_reading(experiment: str) -> dict[str, Any]:
    """The ``search`` block of the experiment's hyperparameter table sidecar (what the paper says)."""
    for name, spec in TABLES.items():
        if spec.experiment == experiment and spec.kind == "hparams" and load_meta(name).get("search"):
            return load_meta(name)["search"]
    return {}


def off_grid_values(grid: Grid, experiment: str) -> list[tuple[str, str, float, list[str]]]:
    """(method, setting, published value, backbones) of every published hyperparameter outside the grid
    the search runs for it (the paper's own, e.g. Nie Table 2's L_dcl τ 0.01 against A.3's
    {0.03, 0.05, 0.07}); such a value can never be selected."""
    spec = grid.experiment(experiment).search
    if spec is None:
        return []
    searched = cl_search.searched_methods(grid, experiment)
    found: dict[tuple[str, str, float], list[str]] = {}
    for method in spec["methods"]:
        for backbone in searched.get(method, []):
            for axis, value in published_hparams(experiment, backbone, method).items():
                if off_grid(spec["stages"][method], axis, value):
                    found.setdefault((method, axis, value), []).append(backbone)
    return [(m, a, v, b) for (m, a, v), b in found.items()]


def _grid_text(stages, axis: str) -> str:
    return ", ".join(f"{x:g}" for st in stages for x in (st.get("grid") or {}).get(axis, []))


def search_rows(grid: Grid, experiment: str) -> list[dict[str, str]]:
    """The search's deviations (see the module docstring); none without a ``search`` section."""
    spec = grid.experiment(experiment).search
    if spec is None:
        return []
    reading = _search_reading(experiment)
    depth = max(len(st) for st in spec["stages"].values())
    axes = []  # per stage, the settings any method's search varies there
    for k in range(depth):
        found = [a for stages in spec["stages"].values() if len(stages) > k for a in stage_axes(stages[k])]
        axes.append(", ".join(dict.fromkeys(found)))
    ours = {
        "selection": f"STS-B dev Spearman, one seed ({spec['seed']}) per point; test scores for the "
        "winner only",
        "staging": f"{depth} stages: "
        + "; ".join(
            f"stage {k} {a}" + (f" at stage {k - 1}'s winner" if k > 1 else "")
            for k, a in enumerate(axes, start=1)
        ),
    }
    searched = cl_search.searched_methods(grid, experiment)
    pairs = [(b, m) for m in spec["methods"] for b in searched.get(m, [])]
    known = [(b, m) for b, m in pairs if published_hparams(experiment, b, m)]  # a toy backbone has none
    first = {m: set(spec["stages"][m][0].get("grid") or {}) for m in spec["methods"]}
    anchored = 0
    for backbone, method in known:
        configured = cl_search.point_settings(
            grid, cl_search.SearchPoint(experiment, backbone, method, 1, 0, {})
        )
        published = published_hparams(experiment, backbone, method)
        rest = {a: v for a, v in published.items() if a not in first[method]}
        anchored += all(setting_value(configured, a) == v for a, v in rest.items())
    more = len(pairs) - len(known)
    ours["anchor"] = (
        f"stage 1 at the configured values: the published ones in {anchored} of {len(known)} searches"
        + (f" ({more} more on a backbone with no published settings)" if more else "")
    )
    labels = {"selection": "selection metric", "staging": "stages", "anchor": "stage 1 anchor"}
    rows = [
        _row(f"search: {labels[key]}", str(r["paper"]), ours[key], str(r["why"]))
        for key, r in reading.items()
        if key in labels
    ]
    if outside := off_grid_values(grid, experiment):
        listed = "; ".join(f"{m} {a.removeprefix('hp.')} {v:g} ({', '.join(b)})" for m, a, v, b in outside)
        grids = "; ".join(
            dict.fromkeys(
                f"{m} {a.removeprefix('hp.')} {{{_grid_text(spec['stages'][m], a)}}}" for m, a, *_ in outside
            )
        )
        count = sum(len(b) for *_, b in outside)
        rows.append(
            _row(
                "search: published values off the grid",
                f"prints {listed}; grid {grids}",
                f"the grid: these {count} can never be selected (“published off grid”)",
                "the paper disagrees with itself",
            )
        )
    return rows


def deviations(grid: Grid, experiment: str) -> list[dict[str, str]]:
    """The config's declared deviations of ``experiment`` followed by the detected ones."""
    exp = grid.every_experiment.get(experiment)
    if exp is None:
        return []
    declared = [dict(d) for d in exp.get("deviations") or []]
    if grid.options.precision_override:  # the switch replaced the precision a declared row describes
        override = _precision_override(grid, "")[0]
        for row in declared:
            if row.get("setting") == "precision":
                row.update(ours=f"{override['ours']}; declared: {row['ours']}", why=override["why"])
    if not any(spec.experiment == experiment for spec in TABLES.values()):
        # A figure-only experiment (a sweep for Li Fig. 6, Nie Fig. 3): no published numbers beside
        # its cells, so fewer seeds or "backbones without numbers" are not deviations.
        return declared + search_rows(grid, experiment)
    found = detected(grid, experiment)
    if any(row.get("setting") == "precision" for row in declared):
        found = [row for row in found if row["setting"] != "precision"]
    return declared + found + search_rows(grid, experiment)


#: Column titles of a deviations table, by key of a deviation entry.
COLUMNS = {"setting": "setting", "paper": "authors (paper, else script)", "ours": "ours", "why": "why"}


def deviation_table(items: list[dict[str, str]]) -> Table:
    """The deviations ``items`` as a table (setting | authors | ours | why); "none" without items."""
    return rows_table([{title: d[key] for key, title in COLUMNS.items()} for d in items])


def render_page(grid: Grid) -> str:
    """``docs/deviations.md``: every experiment's deviations, readable in two minutes."""
    page = [
        Heading(1, "Deviations from the papers"),
        Paragraph(
            "Generated from `config.yaml` by `python -m contrastlab.tables.deviations config.yaml` (a test "
            "keeps this page equal to the config). Every other setting of every cell is the authors': the "
            "paper's, and where the paper is silent the released code's (cited in each method's `note` in "
            "`config.yaml`); where neither says (MACL's CIFAR study has no released script), the choice is "
            "ours and listed here as such. Each table's Markdown and `results/report.md` repeat the list "
            "for the config a run used, including deviations a preset adds (fewer seeds, shortened runs, "
            "fasttest)."
        ),
    ]
    shown: list[tuple[str, list[dict[str, str]]]] = []
    for name, exp in grid.every_experiment.items():
        found = deviations(grid, name)
        if found or any(spec.experiment == name for spec in TABLES.values()):
            page.append(Heading(2, exp.get("title") or name))
            # An experiment that repeats the start of an earlier one's list (OAR CIFAR-100 after
            # CIFAR-10) names those rows and lists only the rest.
            shared, source = 0, ""
            for title, items in shown:
                k = next(
                    (i for i, (a, b) in enumerate(zip(found, items, strict=False)) if a != b),
                    min(len(found), len(items)),
                )
                if k > shared:
                    shared, source = k, title
            if shared >= 3:
                names = ", ".join(d["setting"] for d in found[:shared])
                rest = found[shared:]
                page.append(Paragraph(f"As `{source}` above: {names}" + ("; and:" if rest else ".")))
                page += [deviation_table(rest)] if rest else []
            else:
                page.append(deviation_table(found))
            shown.append((name, found))
    return to_markdown(page, literals_of(grid.config))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    sys.stdout.write(render_page(Grid(load(argv[0] if argv else "config.yaml"))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
