"""Data access: ports (Protocols) and their DynamoDB/Redis/SQS/SES adapters.

Adapters turn SDK errors into domain exceptions; nothing above this room imports boto3.
"""
