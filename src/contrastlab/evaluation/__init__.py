"""contrastlab.evaluation."""
