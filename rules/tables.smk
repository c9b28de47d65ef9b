# The papers' tables with the published numbers beside ours (contrastlab.tables).


localrules:
    tables,


rule tables:
    input:
        metrics=table_metrics,
    output:
        tables=table_outputs(),
        report=report_path(),
    params:
        config=config,
        metrics_root=f"{R}/metrics",
        tables_dir=f"{R}/tables",
    log:
        f"{R}/logs/tables.log",
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/tables.py"
