"""Domain logic: what Racecap does, independent of how requests arrive or data is kept."""
