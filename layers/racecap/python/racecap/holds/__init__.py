"""holds."""
