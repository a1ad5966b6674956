"""payments."""
