"""participants."""
