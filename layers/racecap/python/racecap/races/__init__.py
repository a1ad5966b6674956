"""races."""
