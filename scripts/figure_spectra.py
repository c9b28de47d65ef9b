"""Snakemake entry: OAR Fig. 3 (singular values and affinity of test embeddings) of one experiment."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from pathlib import Path

from contrastlab.figures.oar import spectra_figure
from contrastlab.workflow.gpus import job_device
from contrastlab.workflow.job import job_data_locations, job_label, logged_to

sm = globals()["snakemake"]
with logged_to(sm.log[0], job_label(sm)):
    device = job_device(sm)  # its own GPU (or the CPU with resources.gpu: 0), before CUDA starts
    import torch

    torch.set_num_threads(max(1, sm.threads))
    encoders = {name: path for name, path in sm.input.items() if name != "images_ready"}
    written = spectra_figure(
        encoders,
        data_root=job_data_locations(sm)["images"],
        stem=Path(sm.output.png).with_suffix(""),
        device=device,
    )
    print(f"figure: {', '.join(encoders)}; wrote {', '.join(p.name for p in written)}")
