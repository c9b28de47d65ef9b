"""contrastlab.training."""
