"""One logger, tracer and metrics object for the whole process (Powertools).

Service name and namespace come from POWERTOOLS_* variables declared in the blueprint.
"""

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
tracer = Tracer()
metrics = Metrics()
