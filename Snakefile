# contrastlab: reproduce Nie 2023, Li 2024, MACL and OAR end to end.
#   snakemake --workflow-profile profiles/local                 # full reproduction, config.yaml
#   snakemake --workflow-profile profiles/local --configfile config/demo.yaml   # offline toy run
import os
import sys

from snakemake.utils import min_version

min_version("9.0")

# The library is this workflow's own src/: the controller imports it from there (rules/common.smk), and
# every job too (PYTHONPATH, which local jobs and SLURM's --export=ALL inherit), so that a job in a conda
# environment built from envs/contrastlab.yaml (`--sdm conda`: the dependencies only) finds it without
# `pip install -e`.
_SRC = os.path.join(workflow.basedir, "src")
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)
os.environ.update(PYTHONPATH=os.pathsep.join(filter(None, [_SRC, os.environ.get("PYTHONPATH")])))


report: "report/workflow.rst"


# `--sdm apptainer` runs every job inside contrastlab's image (container/: a pip environment built from
# constraints.txt's pins, and conda); `--sdm conda apptainer` has conda build envs/contrastlab.yaml inside
# it. `container:`, not `containerized:`: the latter would tell Snakemake the image already holds that conda
# environment, which it does not (docs/cluster.md). Without --sdm apptainer the jobs run where Snakemake does.
from contrastlab import __version__ as _VERSION
from contrastlab.config import invocation as cl_invocation

# A run without --sdm apptainer uses no image, yet Snakemake would stop at a CONTRASTLAB_IMAGE holding a
# space: dropped there, and checked (one line) for an apptainer run.
try:
    cl_invocation.check_image(os.environ, getattr(workflow.deployment_settings, "deployment_method", ()))
except cl_invocation.ConfigError as error:
    sys.exit(f"contrastlab: {error}")

container: os.environ.get("CONTRASTLAB_IMAGE", f"docker://ghcr.io/contrastlab/contrastlab:{_VERSION}")


# config.yaml is the full reproduction; a preset given with --configfile replaces it (Snakemake would
# otherwise merge the two grids).
if not workflow.config_settings.configfiles:

    configfile: "config.yaml"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/mteb.smk"
include: "rules/vision.smk"
include: "rules/figures.smk"
include: "rules/search.smk"
include: "rules/tables.smk"


# Each rule's benchmark file, for the jobs started warm (contrastlab.workflow.warm): Snakemake's benchmark
# measures the process that hands a job over, so the job writes its own memory and CPU seconds beside it.
os.environ[cl_warm.BENCHMARKS_VARIABLE] = cl_warm.benchmark_patterns(workflow.rules)

# A killed run (SIGKILL, power loss) leaves Snakemake's locks behind; the next run clears them itself and
# resumes (rerun-incomplete in the profiles), so recovery is: run the same command again. A live run on the
# results folder, under any of its names, has refused this one already (its claim: rules/common.smk); a
# live run that holds no claim (an older contrastlab's) is refused here, by its record (Snakemake's lock
# compares path strings: a symlinked name would train the same cells at once).
if workflow.is_main_process:
    for note in recover_killed_run(R):
        print(note, file=sys.stderr)
    if refusal := live_run_refusal(R):
        sys.exit(refusal)
    if problem := cl_finished.read_only_problem(finished_outputs()):  # before any job fails on it
        sys.exit(f"contrastlab: {problem}")
    # A backbone folder missing under finished cells (a resources folder moved, the config not told) would
    # be fetched again and retrain them all: said in one line instead (contrastlab.workflow.sources).
    sentence_cells = [
        (c.backbone, RESULTS.checkpoint(c, "model"))
        for c in CELLS
        if trained_output(c) == "model"
    ]
    backbone_dirs = {alias: backbone_dir(alias) for alias in BACKBONES}
    targets = cl_invocation.command_targets(sys.argv[1:])
    if problem := cl_sources.missing_backbone_problem(sentence_cells, backbone_dirs, targets):
        sys.exit(f"contrastlab: {problem}")
    # Where a finished job's inputs lie decides no rerun (a moved checkout or resources folder): the records
    # of jobs that named a loss module (not its code stamp) or a backbone in another resources folder take
    # today's spelling before Snakemake compares them (contrastlab.workflow.sources).
    cl_sources.migrate_recorded_sources(
        os.path.join(".snakemake", "metadata"),
        os.getcwd(),
        workflow.basedir,
        results=R,
        backbones=backbone_dirs,
    )
    # Finished work that no longer matches what its job wrote is moved aside and made again (one line each).
    for note in cl_finished.set_aside_changed(R, finished_outputs()):
        print(note, file=sys.stderr)
    # A finished cell's state is kept by its job until Snakemake accepts the outputs: those of earlier runs
    # that exist and that .snakemake/incomplete does not mark were accepted (a job Snakemake failed after it
    # ended lost them, and one whose run was killed before it recorded them is rerun: both only re-export).
    cl_finished.forget_finished_states(trained_states(), R)


onstart:
    # A local run with a job asking for a device it would not get here (a GPU, cuda_graph: true) stops now,
    # before any job: in the job, Snakemake would have removed the cell's finished checkpoint (a SLURM job
    # checks its own node).
    from contrastlab.workflow import gpus as cl_gpus

    local = workflow.local_exec and not workflow.touch
    if refusal := cl_gpus.local_device_refusal(workflow.dag.needrun_jobs(), local=local):
        sys.exit(f"contrastlab: {refusal}")
    record_running_workflow(R, snakemake_lock_files(workflow))
    cl_budget.write_pins(GRID, SEARCH_POINTS)  # what each search's budget kept, for later runs
    cl_points.write_points(SEARCH_POINTS_FILE, GRID.digest, SEARCH_POINTS)  # for this run's jobs (rules/common.smk)
    # Snakemake deletes the tables job's outputs before it runs: the last good set is kept aside until the
    # run ends, and put back if the re-render fails (contrastlab.workflow.previous_report).
    from contrastlab.workflow import previous_report as cl_previous

    for note in filter(None, [cl_previous.keep_previous(R, REPORT_SET)]):
        print(note, file=sys.stderr)


onsuccess:
    forget_running_workflow(R, snakemake_lock_files(workflow))
    cl_finished.forget_finished_states(trained_states(), R)  # every output accepted
    from contrastlab.workflow import previous_report as cl_previous

    cl_previous.forget_previous(R)


onerror:
    forget_running_workflow(R, snakemake_lock_files(workflow))
    # Snakemake prints its error summary and WorkflowError after this: the failed jobs' contrastlab: lines,
    # read back from their logs, are printed when the process exits, so that the output ends with them.
    from contrastlab.workflow import failures as cl_failures
    from contrastlab.workflow import previous_report as cl_previous

    for note in filter(None, [cl_previous.restore_previous(R, REPORT_SET)]):
        print(note, file=sys.stderr)

    failed = sorted(getattr(workflow.scheduler, "failed", ()), key=str)
    cl_failures.print_at_exit(cl_failures.failure_lines(failed))


# The tables job's outputs: the tables, report.md and report.html (rules/tables.smk).
REPORT_SET = [*table_outputs(), report_path(), report_path().removesuffix(".md") + ".html"]


rule all:
    default_target: True
    input:
        table_outputs(),
        figure_outputs(),
        finished_outputs(),
        report_path(),
        report_path().removesuffix(".md") + ".html",
        data_outputs(),
        existing_if_partial(search_outputs()) if GRID.options.searches_in_all else [],
