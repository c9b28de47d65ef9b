# The papers' tables with the published numbers beside ours, and the report showing them and the figures;
# each table's CSV and the report flagged for Snakemake's report too (report/report.smk).


include: "../report/report.smk"


localrules:
    tables,


rule tables:
    input:
        metrics=table_metrics,
        figures=figure_outputs(),
        searches=search_table_inputs,
    output:
        tables=reported_tables(table_outputs()),
        report=report_path(),
        # the richer report, the one to open first (report/workflow.rst says so)
        report_html=report(
            report_path().removesuffix(".md") + ".html",
            caption=f"{REPORT_CAPTIONS}/report.rst",
            category="Report",
        ),
    params:
        # Without data locations (the tables never read them): moving the data re-renders nothing.
        config={key: value for key, value in config.items() if key not in ("data", "artifacts_lock")},
        metrics_root=lambda wildcards: RESULTS.metrics(),
        results_dir=lambda wildcards: R,  # the report's cost section reads its benchmarks/
        figures=FIGURES,
        tables_dir=lambda wildcards: RESULTS.tables,  # a preset with no paper table (gpu-check) has none
    log:
        RESULTS.log("tables"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/tables.py"
