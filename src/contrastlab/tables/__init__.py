"""contrastlab.tables."""
