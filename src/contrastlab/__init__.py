"""contrastlab: reproduction of Nie 2023, Li 2024, MACL (Huang 2023) and OAR as one Snakemake pipeline.

The library is laid out in layers; a module imports its own package and the layers below it, never
another package of its own layer nor anything above. The order is data in pyproject.toml's
``[tool.importlinter]`` contracts, which ``lint-imports`` (and ``tests/test_layers.py``) checks: every
import, function-local ones included, and no modules of one package importing each other in a circle.
Bottom first:

1. paths: ``paths`` (the repository root and the optional ``shared`` folder);
2. foundations: ``provenance``, ``senteval``, ``precision``, ``artifacts``, ``cuda`` (what produced a
   result; the SentEval benchmark as data and its file readers; PyTorch's fp32/TF32 switches; the
   artifacts lock that pins every download's and backbone's bytes; whether the installed torch runs on
   the node's driver and GPUs);
3. components: ``data``, ``models``, ``losses`` (downloads, fixtures, image datasets and transforms;
   text and image encoders; every loss and its catalogue);
3b. analysis: ``analysis`` (Li's gradient paradigm of any loss: an analysis the figures read);
4. grid: ``config`` (the validated config and its cells; it reads the loss catalogue);
5. search: ``search`` (hyperparameter searches: their points as cells, selection on dev scores);
6. training: ``training`` (the runtime both trainers share, the sentence, vision and synthetic
   trainers);
7. evaluation: ``evaluation`` (SentEval-protocol and image evaluation of what training wrote);
8. tables: ``tables`` (published numbers beside ours);
8b. cost: ``cost`` (what a run costs: FLOPs, calibration, the plan and when it finishes, the search
   budget, measured job cost, make gpu-check's figures);
9. figures: ``figures`` (the papers' figures, from the metrics the tables collect);
9b. report: ``report`` (the run's page: every table written, report.md's sections, the papers'
   claims, report.html);
10. glue: ``workflow`` (what the Snakemake scripts share);
11. versioning: ``versioning`` (freeze and restore a finished run with DVC).

Above the library: ``scripts/`` (one call into it per rule) and ``Snakefile`` / ``rules/``.
"""

__version__ = "0.1.0"
