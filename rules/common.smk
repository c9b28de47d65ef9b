# What the rules look up: the validated config, its cells and searches, where their files lie (RESULTS), and
# the input functions. Logic lives in the library (contrastlab.config, .search, .cost, .paths, ...).
#
# Names: get_<what>(wildcards) is a function Snakemake calls with a job's wildcards (an input, params or
# resources function: a rule's `input: x=get_x` is looked up per job); <what>_of(wildcards) is a lookup
# those functions share (cell_of, search_point_of, place_of); <what>_outputs() lists files while the
# Snakefile is read (rule all, rule tables).
#
# While the Snakefile is read (by the main process, and again by every job's own process) this file
# computes only what the DAG needs: no pandas (the tables' and figures' modules import it where a table
# or figure is made), and the search points priced once per run (contrastlab.workflow.points).
import dataclasses
import functools
import os
import re
import shlex
import sys

from contrastlab import config as cl_config
from contrastlab.config.command_line import (
    CONFIG_WORDS_VARIABLE,
    CONFIGFILES_VARIABLE,
    check_config_words,
    configfile_words,
)
from contrastlab.figures import catalog as figure_catalog
from contrastlab import search as cl_search
from contrastlab import artifacts as cl_lock
from contrastlab.data.acquire import data_marker_path
from contrastlab.data.corpus_check import CorpusError
from contrastlab.senteval.protocol import CELL_POOLING
from contrastlab.senteval.tasks import SentEvalDataError
from contrastlab.paths import Results
from contrastlab.cost import budget as cl_budget
from contrastlab.cost import calibration as cl_calibration
from contrastlab.cost import packing as cl_packing
from contrastlab.cost import plan as cl_plan
from contrastlab.tables import tables_for_config
from contrastlab.training.synthetic_settings import SyntheticSettings
from contrastlab.tables.search import search_tables
from contrastlab.workflow import finished as cl_finished
from contrastlab.workflow import points as cl_points
from contrastlab.workflow import sources as cl_sources
from contrastlab.workflow import stale as cl_stale
from contrastlab.provenance import code_differs, git_head
from contrastlab.config.invocation import dry_run
from contrastlab.workflow import warm as cl_warm
from contrastlab.workflow.recovery import (
    claim_results_folder,
    forget_running_workflow,
    live_run_refusal,
    record_running_workflow,
    recover_killed_run,
    snakemake_lock_files,
)

try:
    _validated = cl_config.validate(config)
    cl_config.check_command_paths(workflow.config_settings.configfiles, os.getcwd())  # in every job's command
    check_config_words(workflow.config_settings.config_args)  # so are the --config words, as given
except cl_config.ConfigError as error:
    sys.exit(f"contrastlab: {error}")
# The preset the report's add-seeds lines name (an environment variable: its path decides no rerun).
os.environ[CONFIGFILES_VARIABLE] = configfile_words(workflow.configfiles, os.getcwd())
os.environ[CONFIG_WORDS_VARIABLE] = shlex.join(workflow.config_settings.config_args or ())  # and --config's
# Validated once per workflow, here, and in place: the jobs' snakemake.config is this same dict, so no job
# validates it (nor imports and runs the user's losses) again. validate() is idempotent, which a SLURM
# job's own parse of the Snakefile relies on.
config.clear()
config.update(_validated)

# The workflow's one grid (contrastlab.config.Grid): its cells and their settings, resolved once here and
# handed to everything below that needs cells. Below, the rules ask it, not the config: per experiment
# (GRID.experiment(e)), the folders (GRID.results, GRID.resources), the machines (GRID.compute) and the
# switches (GRID.options).
GRID = cl_config.Grid(config)
RESULTS = GRID.results
R = RESULTS.root
# One results folder, one run: the main process claims the folder (an OS lock on its real path, held for
# the run's life) before anything in it is read or written; of two runs started together under any two of
# its names, one runs and the other stops in one line (contrastlab.workflow.recovery).
if workflow.is_main_process and (refusal := claim_results_folder(R)):
    sys.exit(refusal)
# A rule's cell: its wildcards, so that RESULTS.<path>(CELL) is the rule's pattern; a search's winner is
# evaluated as the cell of method "<method>~searched".
CELL = cl_config.Cell("{experiment}", "{backbone}", "{method}", "{seed}")
SEARCHED_CELL = dataclasses.replace(CELL, method=cl_search.searched_method("{method}"))
PRETRAINED_PLACE = "pretrained/{backbone}"  # a Pretrained row's place, as a cell's (metrics, logs, ...)
CELLS = list(GRID.cells)
PRETRAINED = GRID.pretrained
CELL_INDEX = {(c.experiment, c.backbone, c.method, str(c.seed)): c for c in CELLS}
# Hyperparameter searches (rules/search.smk): their points within each search's GPU-hour budget; a point
# with its own settings is a cell of its own, one equal to a configured cell is that cell. Priced by the
# main process (pinned by the first run of this results folder: a measured calibration changes no started
# search), which keeps them for the jobs when the run starts (onstart, Snakefile); a job's process reads
# them back instead of pricing every search again.
SEARCH_POINTS_FILE = cl_points.points_file(RESULTS)
try:
    SEARCH_POINTS = cl_points.run_points(
        SEARCH_POINTS_FILE,
        GRID.digest,
        lambda: cl_budget.searched_points(GRID, pins=cl_budget.pinned(GRID)),
        main=workflow.is_main_process,
    )
except (cl_config.ConfigError, ValueError) as error:
    sys.exit(f"contrastlab: {error}")
SEARCH_INDEX = {(p.experiment, p.backbone, p.name, str(p.seed)): p for p in SEARCH_POINTS}
# each point's training cell: its own, or the configured cell it shares, even one select: leaves out
CELL_INDEX.update({(p.experiment, p.backbone, p.trained_as, str(p.seed)): p.cell for p in SEARCH_POINTS})
PRETRAINED_POOLING = dict(PRETRAINED)
GPU = GRID.compute["gpu"]
THREADS = GRID.compute["threads"]
FIGURES = figure_catalog.figures(GRID)
USER_LOSS_METHODS = GRID.user_losses
# The backbones as configured, the one map the rules take whole (the wildcards, the recorded backbone
# folders): GRID.backbone(alias) answers for one.
BACKBONES = config["backbones"]


def _alternatives(values):
    return "|".join(sorted({re.escape(str(v)) for v in values})) or "__none__"


def _is_vision(experiment):
    return GRID.experiment(experiment).track == "vision"


SENTENCE_EXPERIMENTS = _alternatives(c.experiment for c in CELLS if not _is_vision(c.experiment))
VISION_EXPERIMENTS = _alternatives(c.experiment for c in CELLS if _is_vision(c.experiment))


wildcard_constraints:
    experiment=_alternatives(c.experiment for c in CELLS),
    backbone=_alternatives(BACKBONES),
    method=_alternatives([c.method for c in CELLS] + [x for p in SEARCH_POINTS for x in (p.name, p.method)]),
    seed=r"\d+",  # any seed: one outside the config asked for by path gets cell_of's one line
    stage=r"\d+",


@functools.cache
def data_marker_identity(what):
    """What the data are (not where): the data rules' only param, so moving a copy retrains nothing."""
    try:
        # The main process may resolve an unpinned download's digest (one HEAD, or the download itself);
        # a job's process reads the lock, which the corpus job has written by then.
        return GRID.data.identity(what, resolve=workflow.is_main_process)
    except (OSError, SentEvalDataError, CorpusError, cl_lock.LockMismatch) as error:  # lock: unreadable
        sys.exit(f"contrastlab: data: {type(error).__name__}: {' '.join(str(error).split())}")


# Check the user's copies before any job starts: a wrong path must not reach (and fail) a data job,
# whose failure would delete the data marker and retrain every cell on the next run.
if workflow.is_main_process:
    # The OAR synthetic study's fields that bound each other, as its job reads them (each field and its
    # losses the config load checked): a bad block is refused now, not when that job starts.
    if GRID.options.oar_synthetic is not None:
        try:
            SyntheticSettings.from_dict(GRID.options.oar_synthetic)
        except ValueError as error:
            sys.exit(f"contrastlab: config key oar_synthetic: {error}")
    for what in ("senteval", "corpus"):
        data_marker_identity(what)
    # A revision asked for that the artifacts lock does not pin stops here, before a fetch job would
    # replace a finished backbone folder by a failing one.
    try:
        GRID.data.check_lock()
    except cl_lock.LockMismatch as error:
        sys.exit(f"contrastlab: {' '.join(str(error).split())}")
    # A dry run names the finished cells that other code trained (another commit, a dirty tree): no rerun
    # trigger sees a change of the package, so "Nothing to be done" would otherwise hide them.
    if dry_run(sys.argv[1:]):
        _head = git_head()
        _found = cl_stale.trained_by_other_code(RESULTS, CELLS, _head, code_differs)
        _note = cl_stale.stale_note(_found, _head)
        if _note:
            print(_note, file=sys.stderr)


def data_marker(what):
    """This run's marker of ``what`` (senteval, corpus): its state, so presets never share it."""
    return data_marker_path(R, what)


def backbone_dir(alias):
    return GRID.resources.backbone_dir(alias)


def get_backbone_inputs(wildcards):
    """The backbone a backbone's tokenizer comes from (``tokenizer_from``), materialised first."""
    dependency = GRID.backbone(wildcards.backbone).get("tokenizer_from")
    return [backbone_dir(dependency)] if dependency else []


def cell_of(wildcards):
    key = (wildcards.experiment, wildcards.backbone, wildcards.method, wildcards.seed)
    if key not in CELL_INDEX:  # a path asked for by hand (a target) that names no selected cell
        sys.exit(f"contrastlab: {GRID.experiment(key[0]).not_a_cell(*key[1:])}")
    return CELL_INDEX[key]


def search_point_of(wildcards):
    """The search point a train job trains (None for a configured cell)."""
    return SEARCH_INDEX.get((wildcards.experiment, wildcards.backbone, wildcards.method, wildcards.seed))


def get_train_settings(wildcards):
    """The resolved settings of one cell: a param, so changing them reruns exactly this cell. A later
    search stage's point: the settings known before its earlier stage has a winner (the job completes
    them, :func:`contrastlab.search.resolve_settings`)."""
    point = search_point_of(wildcards)
    if point is not None:
        settings = cl_search.point_settings(GRID, point)
    else:
        settings = GRID.settings_copy(cell_of(wildcards))
    settings["seed"] = int(wildcards.seed)
    return settings


def get_search_previous_stage(wildcards):
    """The earlier stage's selection file a later-stage point starts from ([] for any other cell)."""
    point = search_point_of(wildcards)
    if point is None or point.stage == 1:
        return []
    return [search_stage_file(point.experiment, point.backbone, point.method, point.stage - 1)]


def search_stage_file(experiment, backbone, method, stage):
    return RESULTS.search_stage(experiment, backbone, method, stage)


@functools.cache
def code_stamp(module):
    return cl_sources.code_stamp(module, os.getcwd())


def loss_source(loss):
    """The code stamp of the loss's module (contrastlab.workflow.sources): a change of its code retrains
    the cells that use it; a docstring, comment or layout edit, or a moved or copied checkout, nothing."""
    return code_stamp(cl_sources.loss_source(loss, os.getcwd(), workflow.basedir))


# Every configured loss's code stamp made current before the jobs are planned: Snakemake lists a folder's
# files once, so a stamp an input function wrote after that would read as missing.
if workflow.is_main_process:
    for _methods in (experiment["methods"] for experiment in GRID.experiments.values()):
        for _method in _methods.values():
            loss_source(_method["loss"])


def get_loss_source(wildcards):
    """The code stamp of the loss's module: a change of a loss's code retrains the cells that use it."""
    return loss_source(get_train_settings(wildcards)["loss"])


def cell_metrics():
    """Every cell's metrics file (``senteval.json``, or ``vision.json`` for a vision cell)."""
    return [RESULTS.metrics(c, GRID.experiment(c.experiment).track) for c in CELLS] + [
        RESULTS.metrics(f"pretrained/{b}", "sentence") for b, _ in PRETRAINED
    ]


def get_table_metrics(wildcards):
    """All metrics of the grid, or only those already present when tables.partial is set."""
    wanted = cell_metrics()
    if GRID.options.tables_partial:
        return [p for p in wanted if os.path.exists(p)]
    return wanted


def _comparison_tables():
    """contrastlab.tables.comparison.comparison_tables: none without a user loss, and its module imports
    pandas (through tables.verdicts), so it is imported only where there is a user loss."""
    if not USER_LOSS_METHODS:
        return []
    from contrastlab.tables.comparison import comparison_tables

    return comparison_tables(GRID)


def selected_tables():
    """Tables of the selected experiments (``select: {experiments: [...]}`` renders only theirs)."""
    return tables_for_config(GRID)


def table_outputs():
    """The selected papers' tables and the comparison tables of the user's losses (tables.comparison)."""
    names = selected_tables() + _comparison_tables() + search_tables(GRID)
    return expand(f"{RESULTS.tables}/{{table}}.{{ext}}", table=names, ext=["csv", "md", "tex"])


def finished_outputs():
    """Every cell's weights folder and metrics file, and the Pretrained rows' metrics (with tables.partial,
    those whose metrics exist): the finished work later jobs trust. Rule all names them so that one moved
    aside (contrastlab.workflow.finished: it no longer matches what its job wrote) or deleted is made
    again, with what depends on it; a missing file that only other jobs read reruns nothing in Snakemake."""
    partial = GRID.options.tables_partial
    weights = [
        RESULTS.checkpoint(c, trained_output(c))
        for c in CELLS
        if not partial or os.path.exists(RESULTS.metrics(c, GRID.experiment(c.experiment).track))
    ]
    return weights + get_table_metrics(None)


def trained_states():
    """Each trained cell's state folder and weights folder: a finished cell's state is kept by its job until
    Snakemake has accepted the outputs (contrastlab.workflow.finished.forget_finished_states)."""
    return [(RESULTS.state("train", c), RESULTS.checkpoint(c, trained_output(c))) for c in CELL_INDEX.values()]


def trained_output(cell):
    """The name of a cell's trained weights folder: ``model`` (sentence track) or ``encoder`` (image)."""
    return "model" if GRID.experiment(cell.experiment).track == "sentence" else "encoder"


def figure_outputs():
    """PNG, PDF and CSV of every figure the config produces (contrastlab.figures.catalog.figures); with
    tables.partial, not the spectra figures whose encoders are not trained yet."""
    return [
        f"{RESULTS.figures}/{f['name']}.{ext}"
        for f in FIGURES
        if not (f["kind"] == "spectra" and GRID.options.tables_partial and not _spectra_ready(f["experiment"]))
        for ext in ("png", "pdf", "csv")
    ]


def study_outputs():
    """The synthetic study's numbers and sweep, which its claims read (none without the study)."""
    if GRID.options.oar_synthetic is None:
        return []
    return [f"{RESULTS.figures}/oar_synthetic/{name}.csv" for name in ("table2_numbers", "table2_sweep")]


def data_outputs():
    """The run's numbers as data (contrastlab.report.scores, .compare) and the study's CSVs."""
    return [f"{RESULTS.tables}/scores.csv", f"{RESULTS.tables}/claims.csv", *study_outputs()]


def _spectra_ready(experiment):
    return all(os.path.exists(p) for p in encoders_for_spectra(experiment).values())


def report_path():
    return RESULTS.report


@functools.cache
def plan_calibration():
    """The calibration `make plan` uses for the card the jobs will get (resources.gpu_model):
    contrastlab.cost.calibration.calibration_for (a measured results/gpu-check/calibration.json of that
    card, else the shipped file of that card, else one scaled by data-sheet peaks)."""
    try:
        return cl_calibration.calibration_for(GRID.compute["gpu_model"])
    except ValueError as error:
        sys.exit(f"contrastlab: {error}")


if GPU:  # read while the Snakefile is: a bad file answers in one line, not inside a job's input function
    plan_calibration()


def runtime(kind, rule=None):
    """Wall-time request (minutes; SLURM's -t): contrastlab.cost.plan.runtime_resource."""
    return cl_plan.runtime_resource(GRID, kind, rule, place_of, plan_calibration)


def get_gpu_share(wildcards):
    """Training jobs that may share this training job's GPU (resources.gpu_share; 1: a GPU of its own):
    contrastlab.cost.packing.job_share, read by the job's GPU claim (contrastlab.workflow.gpus)."""
    return _job_share(wildcards.experiment, wildcards.backbone, wildcards.method, wildcards.seed)


@functools.cache
def _job_share(experiment, backbone, method, seed):
    # asked three times per training job (its gpu_share, group and pack_slots)
    key = (experiment, backbone, method, seed)
    return cl_packing.job_share(GRID, CELL_INDEX[key], plan_calibration, SEARCH_INDEX.get(key))


def get_gpu_pack(wildcards):
    """The job group of a training job that shares its GPU (gpu_pack2, gpu_pack4: the SLURM profiles'
    group-components put that many in one GPU allocation); None for a GPU of its own. Snakemake ignores
    groups in a local run, where the GPU slot locks pack the jobs (contrastlab.workflow.gpus)."""
    return cl_packing.pack_group(get_gpu_share(wildcards))


def get_pack_slots(wildcards):
    """1 for a training job in a pack, else 0: the SLURM profiles give a group job one pack slot
    (resources: pack_slots: 1), so that its packed jobs, which run there one after another, are priced
    as such (one job's GPU, CPUs and memory; the sum of their runtimes)."""
    return int(get_gpu_share(wildcards) > 1)


def place_of(wildcards):
    """The cell of a job, or the backbone of a Pretrained row (for its runtime request)."""
    if "experiment" in wildcards.keys():
        return {"cell": cell_of(wildcards), "point": search_point_of(wildcards)}
    return {"backbone": wildcards.backbone}


def mem_mb(kind):
    return GRID.compute[f"{kind}_mem_mb"]


def images_marker(dataset):
    """This run's marker of a vision dataset (what it is, never where it lies; see data.smk)."""
    return data_marker_path(R, f"images-{dataset}")


def get_cell_images_marker(wildcards):
    return images_marker(GRID.experiment(wildcards.experiment).dataset)


@functools.cache
def images_identity(dataset):
    try:
        return GRID.data.image_identity(dataset)
    except OSError as error:
        sys.exit(f"contrastlab: data: {type(error).__name__}: {' '.join(str(error).split())}")


# A user's CIFAR copy is checked (torchvision's md5 of every file) before any job starts, like SentEval.
if workflow.is_main_process:
    for dataset in sorted({GRID.experiment(c.experiment).dataset for c in CELLS if _is_vision(c.experiment)}):
        images_identity(dataset)


# Figures (rules/figures.smk).
FIGURE_EXPERIMENTS = _alternatives(
    f["experiment"] for f in FIGURES if f["kind"] in ("lr_sweep", "spectra")
)


def existing_if_partial(paths):
    """With tables.partial the report is drawn from what exists: the figures too, so nothing trains."""
    if GRID.options.tables_partial:
        return [p for p in paths if os.path.exists(p)]
    return list(paths)


def get_cell_files(wildcards, kind, name):
    """``<R>/<kind>/<cell>/<name>`` of every selected cell of the figure's experiment (kind:
    ``checkpoints`` or ``metrics``)."""
    of = RESULTS.checkpoint if kind == "checkpoints" else RESULTS.metrics
    return existing_if_partial(f"{of(c)}/{name}" for c in CELLS if c.experiment == wildcards.experiment)


def figure_files(name):
    return {ext: f"{RESULTS.figures}/{name}.{ext}" for ext in ("png", "pdf", "csv")}


def get_experiment_metrics(wildcards):
    """The metrics files of every selected cell of the figure's experiment."""
    return get_cell_files(wildcards, "metrics", "vision.json")


def get_sweep_rates(wildcards):
    """The learning rates of an image experiment's ``sweep``: the figure's x axis."""
    return GRID.experiment(wildcards.experiment).spec["sweep"]["lr"]


def get_ffn_label_fractions(wildcards):
    """The labelled fractions the experiment's FFN probes were fitted at (where its ``vision_evaluation``
    leaves them out, OAR's three: contrastlab.evaluation.vision.FFN_DEFAULTS)."""
    ffn = GRID.experiment(wildcards.experiment).vision_evaluation.get("ffn") or {}
    return ffn.get("label_fractions", [0.1, 0.5, 1.0])


def get_spectra_encoders(wildcards):
    return encoders_for_spectra(wildcards.experiment)


def encoders_for_spectra(experiment):
    """name -> encoder dir of the first selected seed and backbone of each method in ``spectra``."""
    out = {}
    for method in GRID.experiment(experiment).spec["spectra"]:
        chosen = [c for c in CELLS if c.experiment == experiment and c.method == method]
        if chosen:
            out[method] = RESULTS.checkpoint(min(chosen, key=lambda c: c.seed), "encoder")
    return out


# Hyperparameter searches (rules/search.smk).
SEARCHES = cl_search.searches(SEARCH_POINTS)


def get_search_stage_models(wildcards):
    """The checkpoints of one stage's points (a point shared with a configured cell: that cell's)."""
    points = SEARCHES[(wildcards.experiment, wildcards.backbone, wildcards.method)][int(wildcards.stage)]
    return [RESULTS.checkpoint(p.cell, "model") for p in points]


def get_search_stage_points(wildcards):
    points = SEARCHES[(wildcards.experiment, wildcards.backbone, wildcards.method)][int(wildcards.stage)]
    return [dataclasses.asdict(p) for p in points]


def get_search_last_stage(wildcards):
    stages = SEARCHES[(wildcards.experiment, wildcards.backbone, wildcards.method)]
    return search_stage_file(wildcards.experiment, wildcards.backbone, wildcards.method, max(stages))


def search_outputs():
    """Every stage's selection and every search's evaluated winner."""
    out = []
    for (experiment, backbone, method), stages in SEARCHES.items():
        out += [search_stage_file(experiment, backbone, method, k) for k in stages]
        seed = stages[1][0].seed
        winner = cl_config.Cell(experiment, backbone, cl_search.searched_method(method), seed)
        out.append(RESULTS.metrics(winner, "sentence"))
    return out


def get_search_table_inputs(wildcards):
    """What the tables read of the searches: everything, when they run with the default target."""
    if not GRID.options.searches_in_all:
        return []
    return existing_if_partial(search_outputs())


def get_search_figure_inputs(wildcards):
    return existing_if_partial(
        search_stage_file(e, b, m, k)
        for (e, b, m), stages in SEARCHES.items()
        if e == wildcards.experiment
        for k in stages
    )


# MTEB's evaluator and the bridge table (rules/mteb.smk; mteb.enabled).
# mteb.experiments may name experiments a preset cut from the demo no longer has: they are skipped
# (config/demo.yaml names nie2023; a copy holding only macl scores nothing and still runs).


def mteb_scores(experiment):
    """Whether MTEB's evaluator (rules/mteb.smk) scores the cells of ``experiment``: mteb.enabled, a
    sentence experiment, and one that mteb.experiments names (None: every one)."""
    chosen = GRID.options.mteb["experiments"]
    return (
        GRID.options.mteb["enabled"]
        and not _is_vision(experiment)
        and (chosen is None or experiment in chosen)
    )


def get_mteb_outputs(wildcards):
    """The MTEB folder of every cell MTEB's evaluator scores (mteb_scores; [] when mteb.enabled is
    off); with tables.partial, those whose checkpoint exists (nothing trains for the bridge table)."""
    cells = [c for c in CELLS if mteb_scores(c.experiment)]
    if GRID.options.tables_partial:
        cells = [c for c in cells if os.path.exists(RESULTS.checkpoint(c, "model"))]
    return [RESULTS.mteb(c) for c in cells]
