# contrastlab: reproduce Nie 2023, Li 2024, MACL and OAR end to end.
#   snakemake --workflow-profile profiles/local                 # full reproduction, config.yaml
#   snakemake --workflow-profile profiles/local --configfile config/demo.yaml   # offline toy run
from snakemake.utils import min_version

min_version("9.0")


# config.yaml is the full reproduction; a preset given with --configfile replaces it (Snakemake would
# otherwise merge the two grids).
if not workflow.config_settings.configfiles:

    configfile: "config.yaml"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/vision.smk"
include: "rules/figures.smk"
include: "rules/search.smk"
include: "rules/tables.smk"


# A killed run (SIGKILL, power loss) leaves Snakemake's locks behind; the next run clears them itself and
# resumes (rerun-incomplete in the profiles), so recovery is: run the same command again.
if workflow.is_main_process:
    note = recover_killed_run(R)
    if note:
        print(note, file=sys.stderr)


onstart:
    record_running_workflow(R)
    cl_budget.write_pins(config, SEARCH_POINTS)  # what each search's budget kept, for later runs


onsuccess:
    forget_running_workflow(R)


onerror:
    forget_running_workflow(R)


rule all:
    default_target: True
    input:
        table_outputs(),
        figure_outputs(),
        card_outputs(),
        report_path(),
        report_path().removesuffix(".md") + ".html",
        existing_if_partial(search_outputs()) if config["searches"]["in_all"] else [],
