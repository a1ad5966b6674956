"""places."""
