"""AWS plumbing every capability shares: DynamoDB attribute values and items, the single-table
key schema (``keys``), transactions and retries, SQS queues. Imports no capability."""
