"""Registration: a held place to a paid, confirmed registration — the form, the payment step,
the queued message, the reserved-concurrency writer, the sweeper, the runner's status."""
