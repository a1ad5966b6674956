"""Every construct id, tag key and deploy-time knob the blueprint does not declare.

Names of tables, queues, functions, routes and their sizes live in ``blueprint``; this
module only holds what is specific to the AWS rendering of them.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_logs as logs

import blueprint

# --- the app -----------------------------------------------------------------------
# Function, API, workflow and flow logs: long enough to investigate a registration opening.
LOG_RETENTION = logs.RetentionDays.ONE_MONTH
STACK_ID = "Racecap"
DUMMY_ACCOUNT = "123456789012"  # synth offline; the CLI overrides it with the real one
DEFAULT_REGION = "us-east-1"
CDK_JSON = blueprint.ROOT / "cdk.json"

# Maps every template resource back to the blueprint declaration it renders. The tests
# (and anyone in the console) read it; nothing at run time does.
BLUEPRINT_TAG = "racecap:blueprint-id"
APP_TAG = "racecap:app"

# --- construct ids (one per capability, then one per blueprint item inside) ------------
NETWORK_ID = "Network"
CACHE_ID = "Cache"
TABLES_ID = "Tables"
QUEUES_ID = "Queues"
BUCKETS_ID = "Buckets"
SECRETS_ID = "Secrets"
FUNCTIONS_ID = "Functions"
TRIGGERS_ID = "QueueTriggers"
STATE_MACHINES_ID = "StateMachines"
AUTH_ID = "DirectorAuth"
HTTP_API_ID = "HttpApi"
SCHEDULES_ID = "Schedules"
SITE_ID = "Site"
EDGE_STACK_ID = "RacecapEdge"
EDGE_REGION = "us-east-1"  # CloudFront web ACLs exist only there
MONITORING_ID = "Monitoring"

# --- Lambda ----------------------------------------------------------------------------
# Kept at 3.12: the deps layer (`make layers`) is built for it.
PYTHON_RUNTIME = "python3.12"
# One Powertools: the version pinned in requirements.txt, shipped in the deps layer, is the
# one the tests run (tests/infra asserts the pins agree) and the one deployed. No public
# layer: its version would be a guess, and its Powertools would shadow or be shadowed.
REQUIREMENTS_FILE: Path = blueprint.ROOT / "requirements.txt"
PROJECT_LAYER_DIR: Path = blueprint.ROOT / "layers" / "racecap"
DEPS_LAYER_DIR: Path = blueprint.ROOT / ".build" / "layers" / "deps"
ASSET_EXCLUDES = ["__pycache__", "*.pyc", ".pytest_cache", "tests"]

# --- tables ----------------------------------------------------------------------------
# Tables whose loss would be harmless (none since the email sender's idempotency records
# moved to the cache, issue 14); every other table is retained and deletion-protected.
DISPOSABLE_TABLES: frozenset[str] = frozenset()

# --- cache -----------------------------------------------------------------------------
CACHE_ENGINE = "valkey"
CACHE_MAJOR_VERSION = "8"
CACHE_PORT = 6379
CACHE_READER_PORT = 6380  # ElastiCache Serverless serves replica reads on the next port

# --- HTTP API --------------------------------------------------------------------------
# Stage-wide default: below the account's 10,000 req/s so one stage cannot starve others,
# above the paper's 4,904 req/s peak. Clients get 429 and the waiting screen backs off.
API_THROTTLE_RATE = 8000
API_THROTTLE_BURST = 5000

# --- site ------------------------------------------------------------------------------
SITE_BUILD_DIR: Path = blueprint.ROOT / ".build" / "site"
SITE_SOURCE_DIR: Path = blueprint.ROOT / "site"
API_PATH_PATTERN = "/api/*"
RESULTS_CACHE_POLICY_ID = "ApiCachePolicy"
SITE_INDEX = "index.html"
ACCESS_LOG_EXPIRY_DAYS = 90

# --- outputs ---------------------------------------------------------------------------
OUTPUT_SITE_URL = "SiteUrl"
OUTPUT_API_URL = "ApiUrl"
OUTPUT_USER_POOL_ID = "DirectorUserPoolId"
OUTPUT_USER_POOL_CLIENT_ID = "DirectorUserPoolClientId"
OUTPUT_SMOKE_SECRET = "SmokeDirectorSecretArn"  # noqa: S105 (an output name, not a secret)
OUTPUT_SMOKE_RUNNER_POLICY = "SmokeRunnerPolicyArn"
OUTPUT_SMOKE_ENROLLER_POLICY = "SmokeEnrollerPolicyArn"
OUTPUT_ALARM_TOPIC = "AlarmTopicArn"
OUTPUT_DASHBOARD = "DashboardName"
OUTPUT_AUDIT_FUNCTION = "AuditFunctionName"

# --- inner construct ids -----------------------------------------------------------------
VPC_ID = "Vpc"
PRIVATE_SUBNET_NAME = "private"
PUBLIC_SUBNET_NAME = "public"
# One NAT instance (not a NAT gateway: ~$33 per AZ-month) carries the functions' calls to the
# payment provider and to the AWS APIs that have no gateway endpoint. Set to 2 for one per AZ.
NAT_INSTANCES = 1
NAT_INSTANCE_TYPE = "t4g.nano"
NAT_ROOT_VOLUME_GB = 8  # the AL2023 image's own size
FLOW_LOG_GROUP_ID = "FlowLogs"
FLOW_LOG_ID = "RejectedFlows"
DYNAMODB_ENDPOINT_ID = "DynamoDbEndpoint"
S3_ENDPOINT_ID = "S3Endpoint"
CACHE_CLIENTS_SG_ID = "CacheClients"
FUNCTIONS_SG_ID = "Functions"
CACHE_SG_ID = "CacheSecurityGroup"
SERVERLESS_CACHE_ID = "ServerlessCache"
ROLE_ID = "Role"
LIVE_ALIAS_ID = "Live"
LIVE_ALIAS_NAME = blueprint.LIVE_ALIAS
PROVISIONED_SCALING_ID = "ProvisionedConcurrency"
LOG_GROUP_ID = "Logs"
PROJECT_LAYER_ID = "ProjectLayer"
DEPS_LAYER_ID = "DepsLayer"
STAGE_ID = "DefaultStage"
ACCESS_LOGS_ID = "AccessLogs"
USER_POOL_ID = "Directors"
USER_POOL_CLIENT_ID = "DirectorsClient"
SMOKE_DIRECTOR_ID = "SmokeDirector"
SMOKE_USER_ID = "User"
SMOKE_SECRET_ID = "Secret"  # noqa: S105 (a construct id, not a secret)
SMOKE_RUNNER_POLICY_ID = "SmokeRunner"
SMOKE_ENROLLER_POLICY_ID = "SmokeEnroller"
AUTHORIZER_ID = "DirectorAuthorizer"
SITE_BUCKET_ID = "Bucket"
ACCESS_LOG_BUCKET_ID = "AccessLogBucket"
DISTRIBUTION_ID = "Distribution"
SECURITY_HEADERS_POLICY_ID = "SecurityHeaders"
# cdk.json context: the payment provider's card-form origin, if not Stripe's (the CSP allows it).
PAYMENT_ORIGIN_CONTEXT = "racecap:paymentOrigin"
DEPLOYMENT_ID = "Deployment"
FUNCTION_ID = "Function"
STATE_MACHINE_ID = "StateMachine"
TRIGGER_ID_JOINER = "From"
HTTP_API_RESOURCE_ID = "Api"
INTEGRATION_SUFFIX = "Integration"
SITE_BUCKET_LOG_PREFIX = "s3/site/"
DISTRIBUTION_LOG_PREFIX = "cloudfront/"
DASHBOARD_ID = "Dashboard"
ASYNC_INVOKE_SUFFIX = "AsyncInvoke"
PERSONAL_DATA_KEY_ID = "PersonalDataKey"
WEB_ACL_ID = "WebAcl"
LOAD_GENERATORS_ID = "LoadGenerators"
ORIGIN_SECRET_ID = "OriginSecret"  # noqa: S105 (a construct id, not a secret)
# cdk.json / `cdk deploy -c loadGeneratorCidrs=203.0.113.7/32,198.51.100.0/28`
LOAD_GENERATOR_CONTEXT = "loadGeneratorCidrs"
ALARM_TOPIC_ID = "AlarmTopic"
ALARM_KEY_ID = "AlarmTopicKey"
ALARM_API_5XX = "Api5xxRate"
ALARM_WRITER_LAG = "WriterLag"
ALARM_PAYMENT_FAILURES = "PaymentFailureRate"
ALARM_SES_THROTTLING = "SesThrottling"
# The director's console (/admin/*): its response headers policy and its index function.
CONSOLE_HEADERS_POLICY_ID = "ConsoleHeaders"
CONSOLE_INDEX_FUNCTION_ID = "ConsoleIndex"
