"""Racecap's shared Lambda layer: domain logic, data access and plumbing.

Three rooms, one direction of dependency: handlers (``functions/*``) call ``logic``;
``logic`` calls ports in ``dal``; ``dal`` adapters talk to DynamoDB, Redis, SQS, SES.
"""
