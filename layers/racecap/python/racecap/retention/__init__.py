"""The retention purge: a race's personal data deleted once its retention period is over."""
