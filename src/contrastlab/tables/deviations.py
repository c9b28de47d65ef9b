"""Where our cells deliberately differ from the authors' setups, per paper, from the config.

Two sources, one list per experiment:

- the config's ``experiments.<name>.deviations``: the choices written down by hand, each with what the
  paper (or its released script) did, what we do, and why (``config.yaml`` holds the full
  reproduction's);
- deviations that follow from the config the run actually used, detected here: a
  ``precision_override``, an evaluation ``mode`` other than ``test``, shortened training
  (``max_steps``/``max_sentences``), fewer seeds than the paper's three-run averages, backbones the
  paper does not have.

Each table's Markdown and ``report.md`` list them ("none" when empty); ``docs/deviations.md`` is
:func:`render_page` of ``config.yaml`` (a test keeps the two equal)::

    python -m contrastlab.tables.deviations config.yaml > docs/deviations.md
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from contrastlab.tables.markdown import markdown_table

#: Seeds the papers average over ("the average value obtained from three runs").
PAPER_RUNS = 3
PAPER_MODE = "test"


def _training_values(config: Mapping[str, Any], experiment: str, key: str) -> set:
    """Every value ``key`` takes in the experiment's cells' resolved training settings."""
    from contrastlab.config import cells, method_settings

    everything = {**config, "select": {"experiments": [experiment]}}
    # Settings do not depend on select: read them from the config itself, resolved once for all keys.
    resolved = config if "training" in config else {"training": {}, **config}
    return {method_settings(resolved, c.experiment, c.method, c.backbone).get(key) for c in cells(everything)}


def detected(config: Mapping[str, Any], experiment: str) -> list[dict[str, str]]:
    """Deviations that follow from the config itself (see the module docstring)."""

    exp = config["experiments"][experiment]
    if exp.get("track") == "vision":
        return _precision_override(config, "each paper's own (the code's: fp32)") + _detected_vision(
            config, experiment
        )
    out = _precision_override(config, "each paper's own (fp32 for Nie and Li, fp16 for SimCSE-based cells)")
    mode = (config.get("evaluation") or {}).get("mode", PAPER_MODE)
    if mode != PAPER_MODE:
        out.append(
            {
                "setting": "evaluation mode",
                "paper": "SentEval test mode (10 folds, Adam probe)",
                "ours": f"{mode} (5 folds, SimCSE's RMSprop fasttest probe)",
                "why": "a quick preset; transfer accuracies are not comparable to the paper's",
            }
        )
    for key in ("max_steps", "max_sentences"):
        values = sorted(v for v in _training_values(config, experiment, key) if v is not None)
        if values:
            out.append(
                {
                    "setting": key,
                    "paper": "one epoch over 1M Wikipedia sentences",
                    "ours": f"{key} = {', '.join(map(str, values))}",
                    "why": "a shortened run (preset); scores are not comparable to the paper's",
                }
            )
    seeds = exp.get("seeds") or config.get("seeds") or []
    if len(seeds) < PAPER_RUNS:
        out.append(
            {
                "setting": "seeds",
                "paper": f"mean of {PAPER_RUNS} runs",
                "ours": f"{len(seeds)} seed(s): {', '.join(map(str, seeds))}",
                "why": "a preset with fewer runs",
            }
        )
    out += _extra_backbones(config, experiment, "offline or small backbones of a preset")
    return out


def _extra_backbones(config: Mapping[str, Any], experiment: str, why: str) -> list[dict[str, str]]:
    """The backbones the experiment trains that no table of its paper has (no published numbers)."""
    from contrastlab.tables.published import paper_backbones

    in_paper = paper_backbones(experiment)
    extra = [b for b in config["experiments"][experiment].get("backbones") or [] if b not in in_paper]
    if not extra:
        return []
    ours = f"also {', '.join(extra)} (no published numbers)"
    return [{"setting": "backbones", "paper": ", ".join(in_paper), "ours": ours, "why": why}]


#: Each vision table's paper schedule (single runs: no seed count to compare). MACL App. B.3: "We
#: train the encoders for 200 epochs"; OAR §5: "100 epochs of training".
VISION_PAPER_EPOCHS = {"macl_cifar10": 200, "oar_cifar10": 100, "oar_cifar100": 100}


def _precision_override(config: Mapping[str, Any], paper: str) -> list[dict[str, str]]:
    """The row of ``precision_override`` (it reaches every cell, sentence and image), if set."""
    override = config.get("precision_override")
    if not override:
        return []
    return [
        {
            "setting": "precision",
            "paper": paper,
            "ours": f"{override} for every cell (precision_override)",
            "why": "the speed switch of this run's config",
        }
    ]


def _detected_vision(config: Mapping[str, Any], experiment: str) -> list[dict[str, str]]:
    """Shortened schedules and backbones without published numbers, for a vision experiment."""

    out = []
    paper_epochs = VISION_PAPER_EPOCHS.get(experiment, VISION_PAPER_EPOCHS["macl_cifar10"])
    epochs = sorted(v for v in _training_values(config, experiment, "epochs") if v != paper_epochs)
    steps = sorted(v for v in _training_values(config, experiment, "max_steps") if v is not None)
    if epochs or steps:
        ours = [f"epochs = {', '.join(map(str, epochs))}"] if epochs else []
        ours += [f"max_steps = {', '.join(map(str, steps))}"] if steps else []
        out.append(
            {
                "setting": "schedule",
                "paper": f"{paper_epochs} epochs",
                "ours": "; ".join(ours),
                "why": "a shortened run (preset); accuracies are not comparable to the paper's",
            }
        )
    return out + _extra_backbones(config, experiment, "small encoders of a preset")


def deviations(config: Mapping[str, Any], experiment: str) -> list[dict[str, str]]:
    """The config's declared deviations of ``experiment`` followed by the detected ones."""
    exp = (config.get("experiments") or {}).get(experiment)
    if exp is None:
        return []
    declared = [dict(d) for d in exp.get("deviations") or []]
    if config.get("precision_override"):  # the switch replaced the precision a declared row describes
        override = _precision_override(config, "")[0]
        for row in declared:
            if row.get("setting") == "precision":
                row.update(ours=f"{override['ours']}; declared: {row['ours']}", why=override["why"])
    from contrastlab.tables.published import TABLES

    if not any(spec.experiment == experiment for spec in TABLES.values()):
        # A figure-only experiment (a sweep for Li Fig. 6, Nie Fig. 3): no published numbers beside
        # its cells, so fewer seeds or "backbones without numbers" are not deviations.
        return declared
    found = detected(config, experiment)
    if any(row.get("setting") == "precision" for row in declared):
        found = [row for row in found if row["setting"] != "precision"]
    return declared + found


#: Column titles of a deviations table, by key of a deviation entry.
COLUMNS = {"setting": "setting", "paper": "authors (paper, else script)", "ours": "ours", "why": "why"}


def markdown_lines(items: list[dict[str, str]]) -> list[str]:
    """A Markdown table (setting | authors | ours | why), or one "none" line."""
    return markdown_table([{title: d[key] for key, title in COLUMNS.items()} for d in items])


def render_page(config: Mapping[str, Any]) -> str:
    """``docs/deviations.md``: every experiment's deviations, readable in two minutes."""
    lines = [
        "# Deviations from the papers",
        "",
        "Generated from `config.yaml` by `python -m contrastlab.tables.deviations config.yaml` (a test "
        "keeps this page equal to the config). Every other setting of every cell is the authors': the "
        "paper's, and where the paper is silent the released code's (cited in each method's `note` in "
        "`config.yaml`); where neither says (MACL's CIFAR study has no released script), the choice is "
        "ours and listed here as such. Each table's Markdown and `results/report.md` repeat the list for "
        "the config a run used, including deviations a preset adds (fewer seeds, shortened runs, fasttest).",
        "",
    ]
    shown: list[tuple[str, list[dict[str, str]]]] = []
    for name, exp in (config.get("experiments") or {}).items():
        found = deviations(config, name)
        if found or any(spec.experiment == name for spec in _tables().values()):
            lines += [f"## {exp.get('title') or name}", ""]
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
                lines += [f"As `{source}` above: {names}" + ("; and:" if rest else ".")]
                lines += ([""] + markdown_lines(rest)) if rest else []
                lines += [""]
            else:
                lines += markdown_lines(found) + [""]
            shown.append((name, found))
    return "\n".join(lines)


def _tables():
    from contrastlab.tables.published import TABLES

    return TABLES


def main(argv: list[str] | None = None) -> int:
    from contrastlab.config import load

    argv = sys.argv[1:] if argv is None else argv
    sys.stdout.write(render_page(load(argv[0] if argv else "config.yaml")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
