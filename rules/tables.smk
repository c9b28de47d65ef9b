# The papers' tables with the published numbers beside ours, and the report showing them and the figures.


localrules:
    tables,


rule tables:
    input:
        metrics=table_metrics,
        figures=figure_outputs(),
        searches=search_table_inputs,
    output:
        tables=table_outputs(),
        report=report_path(),
        report_html=report_path().removesuffix(".md") + ".html",
    params:
        # Without data locations (the tables never read them): moving the data re-renders nothing.
        config={key: value for key, value in config.items() if key != "data"},
        metrics_root=lambda wildcards: f"{R}/metrics",
        results_dir=lambda wildcards: R,  # the report's cost section reads its benchmarks/
        figures=FIGURES,
        tables_dir=lambda wildcards: f"{R}/tables",  # a preset with no paper table (gpu-check) has none
    log:
        f"{R}/logs/tables.log",
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/tables.py"
