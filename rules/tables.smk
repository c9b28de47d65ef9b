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
        # Without data locations (the tables never read them): moving the data re-renders nothing.
        config={key: value for key, value in config.items() if key != "data"},
        metrics_root=lambda wildcards: f"{R}/metrics",
        tables_dir=lambda wildcards, output: os.path.dirname(output.tables[0]),
    log:
        f"{R}/logs/tables.log",
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/tables.py"
