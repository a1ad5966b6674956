"""Emails: the queued message contract, the templates, the rate-limited SES sender and its
delivery log."""
