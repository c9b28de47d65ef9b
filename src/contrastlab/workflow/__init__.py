"""What the Snakemake scripts share: ``job`` (the job around a script's one library call), ``gpus`` (GPU
slots), ``recovery`` (a killed run and its jobs)."""
