"""The local stack: the same handlers, ASL files and resource declarations as on AWS,
run on one machine against real local servers (see docs/local-stack.md's table)."""
