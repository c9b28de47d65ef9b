"""contrastlab: reproduction of Nie 2023, Li 2024, MACL (Huang 2023) and OAR as one Snakemake pipeline."""

__version__ = "0.1.0"
