"""Snakemake entry: OAR Table 2, the synthetic study (contrastlab.figures.oar_synthetic), on the CPU."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from pathlib import Path

from contrastlab.workflow.job import job_label, logged_to

sm = globals()["snakemake"]
with logged_to(sm.log[0], job_label(sm)):
    import torch

    from contrastlab.figures.oar_synthetic import run_synthetic_study
    from contrastlab.training.synthetic import SyntheticSettings

    torch.set_num_threads(max(1, sm.threads))
    table = run_synthetic_study(
        SyntheticSettings.from_dict(dict(sm.params.settings)),
        Path(sm.output.table).parent,
        figure_stem=Path(sm.output.png).with_suffix(""),
        table_path=sm.output.table,
        sweep_path=sm.output.sweep,
    )
    print(table.to_string(index=False))
