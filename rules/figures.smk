# The papers' figures (contrastlab.figures): PNG + PDF + the CSV of the plotted numbers, shown in the report;
# each PNG flagged for Snakemake's report too (reported_figure). A figure's params are the settings it reads,
# never the whole config: a change to a key it does not read redraws nothing. A paper's own figures are its
# record's (figures.catalog.RECORD_FIGURES), each drawn by the function registered under its name
# (figures.registry) from the script of what it reads; the kinds below them are drawn per experiment.


include: "../report/report.smk"


localrules:
    figure_lr_sweep,


rule figure_lr_sweep:
    input:
        metrics=get_experiment_metrics,
    output:
        **reported_figure("{experiment}/lr_sweep"),
    params:
        rates=get_sweep_rates,
        label_fractions=get_ffn_label_fractions,
        metrics_root=RESULTS.metrics(),
    log:
        RESULTS.log("figures", "{experiment}-lr_sweep"),
    wildcard_constraints:
        experiment=FIGURE_EXPERIMENTS,
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/figure_lr_sweep.py"


rule figure_spectra:
    input:
        unpack(get_spectra_encoders),
        images_ready=get_cell_images_marker,
    output:
        **reported_figure("{experiment}/spectra"),
    log:
        RESULTS.log("figures", "{experiment}-spectra"),
    wildcard_constraints:
        experiment=FIGURE_EXPERIMENTS,
    threads: THREADS
    resources:
        gpu=GPU,
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/figure_spectra.py"


rule oar_synthetic:
    output:
        **reported_figure("oar_synthetic/table2"),
        table=f"{RESULTS.figures}/oar_synthetic/table2_numbers.csv",
        sweep=f"{RESULTS.figures}/oar_synthetic/table2_sweep.csv",
    params:
        settings=GRID.options.oar_synthetic or {},
    log:
        RESULTS.log("figures", "oar_synthetic"),
    benchmark:
        RESULTS.benchmark("oar_synthetic")
    threads: THREADS
    resources:
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/oar_synthetic.py"


# The analytic and simulated figures of a paper (no training): one job per paper, since Li's Fig. 2 and 10
# share one simulation.
for _paper, _names in figure_catalog.ANALYTIC_FIGURES.items():

    rule:
        name:
            f"figure_analytic_{_paper}"
        output:
            [path for name in _names for path in reported_figure(name).values()],
        params:
            figures=_names,
            size=config["analytic_figures"],
            # the CSVs' columns: 2 adds each simulated number's Monte-Carlo error (issue 86), which the
            # claims on these figures read; a run finished before redraws its figures once (no training)
            csv_format=2,
        log:
            RESULTS.log("figures", f"{_paper}-analytic"),
        benchmark:
            RESULTS.benchmark(f"figure_analytic_{_paper}")
        resources:
            mem_mb=mem_mb("eval"),
            runtime=runtime("eval"),
        conda:
            "../envs/contrastlab.yaml"
        script:
            "../scripts/figure_analytic.py"


# The figures over experiments' cells (Nie Fig. 1, 3; Li Fig. 5-9): one job each. What a figure of each
# reading kind reads of a cell: its training log; its metrics and the log beside them.
_CELL_READS = {
    "logs": lambda c: [RESULTS.checkpoint(c, "train_log.jsonl")],
    "metrics": lambda c: [RESULTS.checkpoint(c, "train_log.jsonl"), RESULTS.metrics(c, "sentence")],
}

for _figure, _spec in figure_catalog.CELL_FIGURES.items():

    rule:
        name:
            f"figure_{_figure.rsplit('/', 1)[-1]}"
        input:
            # Only what the figure reads: Li Fig. 6 needs no SentEval evaluation of its 23 cells.
            existing_if_partial(
                path
                for c in CELLS
                if c.experiment in _spec.experiments
                for path in _CELL_READS[_spec.reads](c)
            ),
        output:
            **reported_figure(_figure),
        params:
            figure=_figure,
            experiments=[e for e in _spec.experiments if GRID.experiment(e).configured],
            # each experiment's sweep points (method -> swept key and value; none for an experiment the
            # config does not have): what the figure reads of the config
            points={e: GRID.experiment(e).sweep_points for e in _spec.experiments},
            results=lambda wildcards: R,
        log:
            RESULTS.log("figures", _figure.rsplit("/", 1)[-1]),
        localrule: True
        conda:
            "../envs/contrastlab.yaml"
        script:
            "../scripts/figure_cells.py"


# Li et al.'s gradient paradigm of each loss from the user's code (GD, W, R by autograd; no training):
# the loss's code is an input (its stamp), so a change of that code redraws the figure.
rule figure_paradigm:
    input:
        loss_source=lambda wildcards: loss_source(USER_LOSS_METHODS[wildcards.method][0]),
    output:
        **reported_figure("paradigm/{method}"),
    params:
        loss=lambda wildcards: USER_LOSS_METHODS[wildcards.method][0],
        hp=lambda wildcards: USER_LOSS_METHODS[wildcards.method][1],
        size=config["paradigm_figures"],
    log:
        RESULTS.log("figures", "paradigm-{method}"),
    wildcard_constraints:
        method=_alternatives(USER_LOSS_METHODS),
    resources:
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/figure_paradigm.py"
