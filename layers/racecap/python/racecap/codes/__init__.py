"""Discount codes: a director's codes for a race, and their uses taken atomically with a
runner's hold (models, service, store behind a Protocol, wiring; the shape of
``racecap.results``)."""
