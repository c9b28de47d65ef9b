# The papers' tables with the published numbers beside ours, and the report showing them and the figures;
# each table's CSV and the report flagged for Snakemake's report too (report/report.smk).


include: "../report/report.smk"


localrules:
    tables,


rule tables:
    input:
        metrics=get_table_metrics,
        figures=figure_outputs(),
        # the synthetic study's numbers and sweep, which its claims read (none without the study)
        study=study_outputs(),
        searches=get_search_table_inputs,
        mteb=get_mteb_outputs,  # the bridge table's inputs (rules/mteb.smk; [] unless mteb.enabled)
    output:
        tables=reported_tables(table_outputs()),
        report=report_path(),
        # every score of the run and every claim's verdict, as data (contrastlab.report.scores, .compare)
        scores=f"{RESULTS.tables}/scores.csv",
        claims=f"{RESULTS.tables}/claims.csv",
        # the richer report, the one to open first (report/workflow.rst says so)
        report_html=report(
            report_path().removesuffix(".md") + ".html",
            caption=f"{REPORT_CAPTIONS}/report.rst",
            category="Report",
        ),
    params:
        # Without locations (the script takes them from the job's config): moving the data or the resources
        # folder re-renders nothing.
        config=cl_sources.without_locations(config),
        results_dir=lambda wildcards: R,  # the metrics, where the tables go, the benchmarks (the cost)
        figures=FIGURES,
    log:
        RESULTS.log("tables"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/tables.py"
