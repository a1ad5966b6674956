"""emails."""
