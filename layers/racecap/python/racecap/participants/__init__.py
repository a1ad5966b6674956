"""The directors' participant list: search, pages, the CSV export with answers."""
