"""contrastlab: reproduction of Nie 2023, Li 2024, MACL (Huang 2023) and OAR as one Snakemake pipeline.

The library is laid out in layers: a module imports its own package and the layers below it, never
another package of its own layer nor anything above. The layers, and what each holds, are written once:
pyproject.toml's ``[tool.importlinter]`` contract, top layer first, which ``lint-imports`` (``make
lint``, ``tests/test_layers.py``) checks for every import, function-local ones included. Above the
library: ``scripts/`` (one call into it per rule) and ``Snakefile`` / ``rules/``. docs/layout.md lists
the rooms.
"""

__version__ = "0.2.0"
