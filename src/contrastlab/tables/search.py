"""The searches' selected hyperparameters beside the published ones (Nie Table 2, Li Tables 6–7).

For every experiment with a ``search`` (:mod:`contrastlab.search`) that runs with the default target,
``search_<experiment>`` lists, per searched backbone, method and searched setting: the values the
search tried, the one it selected on dev (the last stage's winner), the configured value (what the
paper cells train with), the published value where the paper's hyperparameter table has one, and
"same as published" / "differs" / "not in paper". The selections are read from
``<results_dir>/search/<experiment>/<backbone>/<method>/stage<k>.json`` (rule ``search_select``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from contrastlab import config as cl_config
from contrastlab import search as cl_search
from contrastlab.tables.markdown import markdown_table
from contrastlab.tables.published import TABLES, load_published

SAME, DIFFERS, NOT_IN_PAPER, NOT_RUN = "same as published", "differs", "not in paper", "not run"
COLUMNS = ["backbone", "method", "setting", "tried", "selected", "configured", "published", "verdict"]


def search_experiments(config: Mapping[str, Any]) -> list[str]:
    """Selected experiments whose search runs with the default target (``searches.in_all``)."""
    if not (config.get("searches") or {}).get("in_all"):
        return []
    chosen = (config.get("select") or {}).get("experiments")
    return [
        name
        for name, exp in (config.get("experiments") or {}).items()
        if exp.get("search") and (not chosen or name in chosen)
    ]


def search_tables(config: Mapping[str, Any]) -> list[str]:
    """Names of the search tables a config produces (``search_<experiment>``)."""
    return [f"search_{name}" for name in search_experiments(config)]


def published_hparams(experiment: str, backbone: str, method: str) -> dict[str, float]:
    """setting -> published value of ``method`` on ``backbone`` in the paper's hyperparameter tables of
    ``experiment`` (``lr``, ``batch_size`` and ``hp.<name>`` keys; NaN entries left out)."""
    out = {}
    for spec in TABLES.values():
        if spec.experiment != experiment or spec.kind != "hparams":
            continue
        table = load_published(spec.name)
        rows = table[(table["backbone"] == backbone) & (table["method"] == method)]
        for key, value in zip(rows["key"], rows["value"], strict=True):
            if not math.isnan(value):
                out[key if key in ("lr", "batch_size") else f"hp.{key}"] = float(value)
    return out


def _selections(results_dir: str | Path | None, experiment: str, backbone: str, method: str) -> list[dict]:
    if results_dir is None:
        return []
    folder = Path(results_dir) / "search" / experiment / backbone / method
    files = sorted(folder.glob("stage*.json"), key=lambda p: int(p.stem.removeprefix("stage")))
    return [json.loads(p.read_text(encoding="utf-8")) for p in files]


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def selection_rows(config: Mapping[str, Any], results_dir: str | Path | None, experiment: str) -> list[dict]:
    """One row per (backbone, method, searched setting) of the experiment's search (:data:`COLUMNS`)."""
    spec = cl_search.search_spec(config, experiment)
    if spec is None:
        return []
    rows = []
    for backbone in spec["backbones"]:
        for method in spec["methods"]:
            if backbone not in cl_search.searched_methods(config, experiment).get(method, []):
                continue
            stages = spec["stages"][method]
            axes = list(
                dict.fromkeys(
                    a for st in stages for a in (*(st.get("grid") or {}), *(st.get("around") or {}))
                )
            )
            selections = _selections(results_dir, experiment, backbone, method)
            done = len(selections) == len(stages)
            winner = selections[-1]["winner_settings"] if done else None
            configured = cl_config.method_settings(config, experiment, method, backbone)
            published = published_hparams(experiment, backbone, method)
            for axis in axes:
                tried = sorted(
                    {cl_search.setting_value(p["settings"], axis) for s in selections for p in s["points"]}
                    - {None},
                    key=lambda v: (str(type(v)), v),
                )
                if not tried:
                    tried = [v for st in stages for v in (st.get("grid") or {}).get(axis, [])]
                selected = cl_search.setting_value(winner, axis) if winner else None
                paper = published.get(axis)
                if winner is None:
                    verdict = NOT_RUN
                elif paper is None:
                    verdict = NOT_IN_PAPER
                else:
                    verdict = SAME if _close(selected, paper) else DIFFERS
                rows.append(
                    {
                        "backbone": backbone,
                        "method": method,
                        "setting": axis,
                        "tried": ", ".join(_fmt(v) for v in tried),
                        "selected": _fmt(selected),
                        "configured": _fmt(cl_search.setting_value(configured, axis)),
                        "published": _fmt(paper),
                        "verdict": verdict,
                        "winner_dev": selections[-1]["winner_dev"] if done else None,
                    }
                )
    return rows


def _latex(rows: Sequence[Mapping[str, Any]]) -> str:
    def esc(text: str) -> str:
        return str(text).replace("_", r"\_").replace("~", r"\textasciitilde{}").replace("—", "--")

    lines = [
        r"\begin{tabular}{" + "l" * len(COLUMNS) + "}",
        r"\toprule",
        " & ".join(COLUMNS) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(esc(row[c]) for c in COLUMNS) + r" \\" for row in rows]
    return "\n".join([*lines, r"\bottomrule", r"\end{tabular}", ""])


def write_search_tables(
    config: Mapping[str, Any], results_dir: str | Path | None, out_dir: str | Path, names: Sequence[str]
) -> tuple[list[Path], list[str]]:
    """Write ``<name>.csv/.md/.tex`` for each search table in ``names``; returns the paths and the
    report's section (its tables inline, and where the heatmaps are)."""
    import pandas as pd

    out_dir = Path(out_dir)
    written, lines = [], []
    for name in names:
        experiment = name.removeprefix("search_")
        rows = selection_rows(config, results_dir, experiment)
        frame = pd.DataFrame(rows, columns=[*COLUMNS, "winner_dev"])
        shown = [{c: r[c] for c in COLUMNS} for r in rows]
        paths = {ext: out_dir / f"{name}.{ext}" for ext in ("csv", "md", "tex")}
        frame.to_csv(paths["csv"], index=False)
        table = markdown_table(shown) if shown else ["(no searched setting)"]
        title = f"Search of {experiment}: selected on dev beside the published hyperparameters"
        paths["md"].write_text("\n".join([f"# {title}", "", *table, ""]), encoding="utf-8")
        paths["tex"].write_text(_latex(shown), encoding="utf-8")
        written += paths.values()
        same = sum(r["verdict"] == SAME for r in rows)
        differs = sum(r["verdict"] == DIFFERS for r in rows)
        lines += [
            f"### {title}",
            "",
            "Each point trained as a cell and was selected on its best STS-B dev Spearman (the trainer's "
            f"dev selection); the test sets scored the winner alone (the “ours, searched” rows of the paper "
            f"tables). {same} selected settings equal the published ones, {differs} differ. Heatmap: "
            f"figure `{experiment}/search`. Files: [csv](tables/{name}.csv) · [tex](tables/{name}.tex).",
            "",
            *table,
            "",
        ]
    if lines:
        lines = ["## Hyperparameter searches", "", *lines]
    return written, lines
