"""retention."""
