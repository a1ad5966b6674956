"""Races and their events: the records, the race-day rules (ages, team sizes, retention),
the store and the cached catalog runners read."""
