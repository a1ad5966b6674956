"""The audit trail: who changed what in a race, kept apart from the data it describes."""
