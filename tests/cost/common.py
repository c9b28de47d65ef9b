"""What the cost tests share: config.yaml's grid and some of its cells, a cell's work under changed
settings, the shipped calibrations, a calibration of measured runs written and read back."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from test_papers import FOUR_PAPERS

from contrastlab import config as cl_config
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import flops as cl_flops
from contrastlab.cost import plan
from contrastlab.papers import PAPERS, paper_of
from contrastlab.paths import REPO_ROOT
from contrastlab.precision import RESOLVED

H200 = cl_calibration.SHIPPED_CALIBRATIONS["H200"]
H100 = cl_calibration.SHIPPED_CALIBRATIONS["H100"]
#: config.yaml cells: Nie's BERT-base fp32 cell (batch 64), MACL's bf16 sentence cell, MACL's image cell
#: at batch 256 and OAR's ResNet-18 224-px cell with the labelled pass.
NIE = cl_config.Cell("nie2023", "bert-base", "cl", 42)
MACL = cl_config.Cell("macl", "bert-base", "simcse", 42)
MACL_IMAGES = cl_config.Cell("macl_cifar10", "resnet18-cifar", "ntxent-bs256", 42)
OAR = cl_config.Cell("oar_cifar10", "resnet18-oar", "oar_infonce-lr1.0", 42)
CHOICES = ("config", "fp32", "tf32", "bf16")


def config_yaml() -> dict:
    """config.yaml's four papers (a paper added since, docs/adding-a-paper.md, left out: the numbers here
    and in docs/cost.md are theirs)."""
    config = cl_config.load(REPO_ROOT / "config.yaml")
    added = {p.prefix for p in PAPERS} - set(FOUR_PAPERS)
    config["experiments"] = {e: x for e, x in config["experiments"].items() if paper_of(e) not in added}
    return config


def config_grid(**resources) -> cl_config.Grid:
    """config.yaml's grid, with ``resources`` over its own."""
    config = config_yaml()
    if resources:
        config = cl_config.validate({**config, "resources": {**config["resources"], **resources}})
    return cl_config.Grid(config)


def preset_grid() -> cl_config.Grid:
    """``make gpu-check``'s preset's grid."""
    return cl_config.Grid(cl_config.load(cl_calibration.GPU_CHECK_PRESET))


def config_work(cell: cl_config.Cell, **settings) -> cl_flops.CellWork:
    """The work of a config.yaml cell with ``settings`` over its own, on a card with native bf16."""
    grid = config_grid()
    changed = dict(grid.settings(cell)) | settings
    if grid.experiment(cell.experiment).track == "vision":
        return cl_flops._vision_work(grid, cell, changed, True)
    model = cl_flops.backbone_transformer(grid, cell.backbone)
    return cl_flops._sentence_work(grid, cell, changed, model, True)


def config_totals(cal, image: dict | None = None, **sentence) -> list[float]:
    """config.yaml's GPU-hours per choice of :data:`CHOICES` (to 0.1) under ``cal``, with ``image`` set in
    every image cell's settings and ``sentence`` in every sentence cell's (patched for this call only)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        for name, patched in (("_vision_work", image or {}), ("_sentence_work", sentence)):
            original = getattr(cl_flops, name)
            monkeypatch.setattr(
                cl_flops, name, lambda c, cell, s, *on, f=original, p=patched: f(c, cell, {**s, **p}, *on)
            )
        jobs = plan.make_plan(config_grid(), cal)
    return [round(plan.total_hours(jobs, c), 1) for c in CHOICES]


def planned(rule: str, cell: str, hours: float, cpu_after_s: float = 0.0) -> SimpleNamespace:
    """A job of the plan with its seconds as configured."""
    return SimpleNamespace(rule=rule, cell=cell, seconds={"config": hours * 3600}, cpu_after_s=cpu_after_s)


def flat_rates(tflops: float = 1.0) -> list[cl_calibration.Measurement]:
    """One measurement of ``tflops`` TFLOP/s for every track and precision."""
    tracks = cl_calibration.TRACKS
    return [cl_calibration.Measurement(t, p, 1e12 * tflops, 1.0) for t in tracks for p in RESOLVED]


def written_calibration(path, measurements, device="toy", source="test", **options):
    """The calibration of ``measurements`` (``calibration_from_measurements`` with ``options``) written
    at ``path`` and read back."""
    data = cl_calibration.calibration_from_measurements(measurements, device=device, source=source, **options)
    return cl_calibration.load_calibration(cl_calibration.write_calibration(path, data))
