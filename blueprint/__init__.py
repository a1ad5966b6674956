"""The one declaration of Racecap's resources.

Every table, queue, function, route, event-source mapping, schedule and state machine
is declared here exactly once. The CDK app (``cdk/``) turns these declarations into
CloudFormation; the local stack (``local/``) turns the same declarations into DynamoDB
Local tables, ElasticMQ queues, gateway routes, SQS pollers and ASL executions. The
parity test (``tests/infra/test_parity.py``) proves both sides agree.

This module is deliberately plain Python (dataclasses, no AWS imports) so both sides,
and the tests, can read it without pulling in the CDK or boto3.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parent.parent
APP_NAME = "racecap"
# The header CloudFront (and the local gateway in its place) sends with OriginSecret's value;
# racecap.http.ORIGIN_VERIFY_HEADER is the same name (a unit test keeps them in step).
ORIGIN_VERIFY_HEADER = "x-origin-verify"


# ---------------------------------------------------------------------------
# References: how an environment variable or ASL substitution names a resource.
# Each side resolves them its own way (a CDK token, or a local name/URL).
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TableName:
    table: str


@dataclass(frozen=True)
class QueueUrl:
    queue: str


@dataclass(frozen=True)
class FunctionArn:
    function: str


@dataclass(frozen=True)
class StateMachineArn:
    state_machine: str


@dataclass(frozen=True)
class BucketName:
    bucket: str


@dataclass(frozen=True)
class SecretId:
    """A secret's id for Secrets Manager's GetSecretValue (its ARN on AWS, its name locally)."""

    secret: str


@dataclass(frozen=True)
class CacheUrl:
    """The Redis/Valkey URL: ElastiCache Serverless (TLS) on AWS, redis-server locally."""


@dataclass(frozen=True)
class OriginSecret:
    """The value CloudFront adds to every API request it forwards (``ORIGIN_VERIFY_HEADER``):
    a generated Secrets Manager secret on AWS, a per-stack random value locally, where the
    gateway plays CloudFront. The API refuses requests without it, so nobody can go around
    the CDN and its WAF by calling the API's own URL."""


@dataclass(frozen=True)
class WarmStartTarget:
    """Application Auto Scaling's id of a provisioned function's warm environments: the
    scalable target ``function:<function name>:<LIVE_ALIAS>`` whose floor (MinCapacity)
    the registration window raises before an opening and lowers after it."""

    function: str


@dataclass(frozen=True)
class Param:
    """A deploy-time parameter with a default (e.g. the SES sender address)."""

    name: str
    default: str


Ref = (
    TableName
    | QueueUrl
    | BucketName
    | SecretId
    | FunctionArn
    | StateMachineArn
    | CacheUrl
    | OriginSecret
    | WarmStartTarget
    | Param
    | str
)

# The alias a warm-started function is invoked through (SnapStart and provisioned
# concurrency both live on a published version behind it).
LIVE_ALIAS = "live"


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Key:
    name: str
    type: Literal["S", "N"] = "S"


@dataclass(frozen=True)
class Index:
    name: str
    partition_key: Key
    sort_key: Key | None = None
    # The non-key attributes the index carries; None: all of them. A write that changes
    # only attributes an index does not carry costs that index nothing.
    include: tuple[str, ...] | None = None

    @property
    def projection(self) -> dict[str, Any]:
        """DynamoDB's ``Projection`` of the index, as CreateTable and CloudFormation take it."""
        if self.include is None:
            return {"ProjectionType": "ALL"}
        return {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(self.include)}


@dataclass(frozen=True)
class Table:
    id: str
    partition_key: Key
    sort_key: Key | None = None
    indexes: tuple[Index, ...] = ()
    ttl_attribute: str | None = None
    # Holds runners' personal data (emails, names, dates of birth, payment references):
    # encrypted on AWS with the stack's customer managed key, so access is auditable and
    # revocable in one place. Locally there is no encryption to speak of.
    personal_data: bool = True

    @property
    def local_name(self) -> str:
        return f"{APP_NAME}-{_kebab(self.id)}"


# ---------------------------------------------------------------------------
# Queues (every queue gets a dead-letter queue; nothing is ever dropped)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Queue:
    id: str
    visibility_timeout_s: int
    max_receive_count: int
    retention_days: int = 4
    dlq_retention_days: int = 14
    personal_data: bool = True  # as Table.personal_data (the queue and its DLQ)

    @property
    def local_name(self) -> str:
        return f"{APP_NAME}-{_kebab(self.id)}"

    @property
    def dlq_id(self) -> str:
        return f"{self.id}Dlq"

    @property
    def dlq_local_name(self) -> str:
        return f"{self.local_name}-dlq"


# ---------------------------------------------------------------------------
# Buckets (private; only presigned URLs and the functions' roles reach them)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Bucket:
    id: str
    expire_days: int  # objects are inputs to process, not records: they go after this
    # Browsers PUT files to it with presigned URLs from the site's origin (the director's
    # console): CORS for that origin only, and the console's CSP names the bucket's origin.
    browser_uploads: bool = False

    def aws_name(self, stack_name: str, account: str, region: str) -> str:
        """Its name on AWS, fixed from the stage (no generated suffix), so the site's CSP can
        name the bucket without depending on it (the bucket's CORS depends on the site)."""
        return f"{stack_name.lower()}-{_kebab(self.id)}-{account}-{region}"

    @property
    def local_name(self) -> str:
        return f"{APP_NAME}-{_kebab(self.id)}"


# ---------------------------------------------------------------------------
# Secrets (Secrets Manager on AWS, moto locally): declared here, their VALUES set out of
# band (``aws secretsmanager put-secret-value``), never in the template or the environment.
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Secret:
    id: str
    description: str
    fields: tuple[str, ...]  # the JSON object's keys

    @property
    def local_name(self) -> str:
        return f"{APP_NAME}-{_kebab(self.id)}"


# ---------------------------------------------------------------------------
# Permissions: what each function may touch (one least-privilege role each)
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TableAccess:
    table: str
    mode: Literal["read", "write", "readwrite"]


@dataclass(frozen=True)
class QueueAccess:
    queue: str
    mode: Literal["send", "consume"]


@dataclass(frozen=True)
class SendEmail:
    pass


@dataclass(frozen=True)
class StartExecution:
    state_machine: str


@dataclass(frozen=True)
class StopExecution:
    """Stop and describe the state machine's executions (not start them)."""

    state_machine: str


@dataclass(frozen=True)
class BucketAccess:
    """``put`` signs upload URLs (the URL carries the signer's rights); ``read`` reads objects."""

    bucket: str
    mode: Literal["put", "read"]
    prefix: str = ""


@dataclass(frozen=True)
class ReadSecret:
    secret: str


@dataclass(frozen=True)
class ScaleWarmStart:
    """Read and move the floor of a provisioned function's warm environments (its
    Application Auto Scaling target), and schedule the floor's return to zero."""

    function: str


Grant = (
    TableAccess | QueueAccess | SendEmail | StartExecution | StopExecution | BucketAccess | ReadSecret | ScaleWarmStart
)


# ---------------------------------------------------------------------------
# Functions, routes, triggers, schedules, state machines
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Function:
    id: str
    code_dir: str  # relative to ROOT; deployed as the Lambda asset
    description: str
    grants: tuple[Grant, ...]
    handler: str = "handler.handler"
    memory_mb: int = 512
    timeout_s: int = 10
    reserved_concurrency: int | None = None
    needs_cache: bool = True
    extra_env: dict[str, Ref] = field(default_factory=dict)
    # How an API function avoids cold starts on AWS (docs/cold-starts.md): "snapstart"
    # (a snapshot of the initialised function, restored) or "provisioned" (environments
    # kept initialised during registration windows, up to ``provisioned_max``). Either way
    # the HTTP API calls a published version through the "live" alias. Locally the gateway keeps
    # the provisioned floor's environments initialised, and a SnapStart function's initialised
    # environments instead of restoring a snapshot (local/environments.py).
    warm_start: Literal["snapstart", "provisioned"] | None = None
    provisioned_max: int = 0

    @property
    def module(self) -> str:
        return self.handler.rsplit(".", 1)[0]

    @property
    def attr(self) -> str:
        return self.handler.rsplit(".", 1)[1]

    @property
    def path(self) -> Path:
        return ROOT / self.code_dir


@dataclass(frozen=True)
class Route:
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "ANY"]
    path: str  # API Gateway syntax, e.g. /api/races/{raceId}; {name+} takes the rest of the path
    function: str
    auth: Literal["none", "director"] = "none"

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}"


@dataclass(frozen=True)
class QueueTrigger:
    function: str
    queue: str
    batch_size: int
    max_concurrency: int  # SQS event source maximum concurrency (>= 2 on AWS)
    max_batching_window_s: int = 0


@dataclass(frozen=True)
class ObjectTrigger:
    """S3 ObjectCreated under ``prefix`` ending in ``suffix`` -> the function (an S3 event)."""

    function: str
    bucket: str
    prefix: str
    suffix: str = ""

    @property
    def failures_queue_id(self) -> str:
        """AWS only: where Lambda's asynchronous invocation parks an S3 event that failed every
        try (the local object watcher calls the function directly)."""
        return f"{self.function}{self.bucket}Failures"


@dataclass(frozen=True)
class CacheBehaviour:
    """One CloudFront cache behaviour, in precedence order; locally the nginx stand-in
    (``local/edge.py``) is generated from the same list.

    ``cached``: the edge keeps responses for as long as the origin's Cache-Control says
    (up to ``max_ttl_s``); otherwise every request goes to the origin. ``query_in_key``:
    the whole query string is part of the cache key."""

    path_pattern: str  # CloudFront syntax: '*' matches any characters, '/' included
    origin: Literal["api", "site"]
    cached: bool
    query_in_key: bool = False
    max_ttl_s: int = 31_536_000


@dataclass(frozen=True)
class Schedule:
    id: str
    function: str
    every_minutes: int

    @property
    def failures_queue_id(self) -> str:
        """AWS only: where EventBridge and Lambda's asynchronous invocation park a tick that
        could not be delivered or failed (the local scheduler calls the function directly)."""
        return f"{self.id}Failures"


@dataclass(frozen=True)
class StateMachine:
    id: str
    definition_file: str  # relative to ROOT
    substitutions: dict[str, Ref]
    type: Literal["STANDARD", "EXPRESS"] = "STANDARD"

    @property
    def local_name(self) -> str:
        return f"{APP_NAME}-{_kebab(self.id)}"

    @property
    def path(self) -> Path:
        return ROOT / self.definition_file


# ---------------------------------------------------------------------------
# What browsers are told about the site and the API docs: the same headers from
# CloudFront's response headers policy (cdk) and from the local gateway (local).
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class PaymentOrigins:
    """Where the payment provider's card form comes from: its script, its frames (card
    fields, 3-D Secure) and the API its script calls. Configuration, not code: Stripe's on
    AWS (``cdk.json`` context ``racecap:paymentOrigin`` overrides), the Stripe stand-in's
    origin locally."""

    script: tuple[str, ...]
    frame: tuple[str, ...]
    connect: tuple[str, ...]

    @classmethod
    def single(cls, origin: str) -> PaymentOrigins:
        """A stand-in that serves its script, frames and API from one origin."""
        return cls((origin,), (origin,), (origin,))


STRIPE_ORIGINS = PaymentOrigins(
    script=("https://js.stripe.com",),
    frame=("https://js.stripe.com", "https://*.stripe.com"),
    connect=("https://api.stripe.com",),
)


def content_security_policy(payments: PaymentOrigins) -> str:
    """No inline script or style anywhere (the site and the docs page load files only)."""

    def sources(*extra: str, base: tuple[str, ...] = ("'self'",)) -> str:
        return " ".join((*base, *extra)) or "'none'"

    directives = {
        "default-src": "'self'",
        "script-src": sources(*payments.script),
        "style-src": "'self'",
        "img-src": "'self' data:",
        "font-src": "'self'",
        "connect-src": sources(*payments.connect),
        "frame-src": sources(*payments.frame, base=()),
        "object-src": "'none'",
        "base-uri": "'none'",
        "form-action": "'self'",
        "frame-ancestors": "'none'",
    }
    return "; ".join(f"{name} {value}" for name, value in directives.items())


def security_headers(payments: PaymentOrigins) -> dict[str, str]:
    """Every response's security headers (CloudFront's managed SecurityHeadersPolicy, with
    a content security policy and frames refused outright)."""
    return {
        "Content-Security-Policy": content_security_policy(payments),
        "Strict-Transport-Security": "max-age=31536000",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "strict-origin-when-cross-origin",
    }


# The race director's console (site/admin/, served at CONSOLE_PATH on the site's origin) has
# a policy of its own: the runner site's, minus the payment provider, plus exactly the two
# origins the console talks to besides its own: Cognito's user-pool endpoint (sign-in,
# refresh, sign-out) and the results bucket (the browser PUTs a results CSV to its presigned
# URL). CloudFront serves it from a /admin/* behaviour (cdk), the local gateway for /admin.
CONSOLE_PATH = "/admin/"


@dataclass(frozen=True)
class ConsoleOrigins:
    """Where the console connects besides 'self': on AWS, ``https://cognito-idp.<region>.amazonaws.com``
    and the results bucket's regional origin; locally moto serves both on one origin."""

    sign_in: str
    uploads: str

    @classmethod
    def aws(cls, region: str, upload_bucket: str) -> ConsoleOrigins:
        # botocore presigns S3 URLs on the bucket's virtual-hosted global name, in every region.
        return cls(f"https://cognito-idp.{region}.amazonaws.com", f"https://{upload_bucket}.s3.amazonaws.com")


def console_content_security_policy(origins: ConsoleOrigins) -> str:
    """No inline script or style; images from the console itself or data: (the TOTP QR code
    is drawn in the page as a data: URL, so the TOTP secret never leaves it)."""
    connect = " ".join(dict.fromkeys(("'self'", origins.sign_in, origins.uploads)))
    directives = {
        "default-src": "'self'",
        "script-src": "'self'",
        "style-src": "'self'",
        "img-src": "'self' data:",
        "font-src": "'self'",
        "connect-src": connect,
        "frame-src": "'none'",
        "object-src": "'none'",
        "base-uri": "'none'",
        "form-action": "'self'",
        "frame-ancestors": "'none'",
    }
    return "; ".join(f"{name} {value}" for name, value in directives.items())


def console_security_headers(origins: ConsoleOrigins) -> dict[str, str]:
    """The console's headers: the site's, with its own CSP and no referrer at all (a
    director's race URLs stay on the console)."""
    return {
        "Content-Security-Policy": console_content_security_policy(origins),
        "Strict-Transport-Security": "max-age=31536000",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
    }


def _kebab(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i:
            out.append("-")
        out.append(ch.lower())
    return "".join(out)


# ===========================================================================
# The declarations
# ===========================================================================
PK = Key("pk")
SK = Key("sk")
GSI1 = Index("gsi1", Key("gsi1pk"), Key("gsi1sk"))

TABLES: tuple[Table, ...] = (
    # Race and event definitions, owned by directors; read-mostly, cached in layers.
    Table("Races", PK, SK, indexes=(GSI1,), personal_data=False),
    # The hot path: cap-counter shards, holds, email claims, bib counters. Conditional
    # writes here are what make "never sold twice" true. Holds expire through TTL as a
    # backstop; the sweeper returns their places well before TTL would.
    # Its index is the sweeper's (holds that can expire or wait for a re-send): it carries the
    # keys and the race and event alone, so a hold's payment steps (status, attempt, intent)
    # never write it — three index writes per registration fewer (issue 14).
    Table("Inventory", PK, SK, indexes=(replace(GSI1, include=("raceId", "eventId")),), ttl_attribute="ttl"),
    # Confirmed (and failed) registrations, written only by the writer.
    Table("Registrations", PK, SK, indexes=(GSI1,)),
    # Every race director's change, per race (pk RACE#<raceId>, sk <at>#<id>). Its own
    # table, not the race's partition in Races: it only grows, it is read by directors
    # alone, and a race definition load (every cache miss in a burst) must stay one
    # small query. Directors write it through AdminApi; the payment functions add the
    # provider's own entries (outside refunds, refunds it failed).
    Table("Audit", PK, SK),
    # Race results: per event a pointer to the current version, the uploads with their
    # validation reports, and each version's rows in a few compressed chunks (a version
    # is written in full before the pointer moves to it, so readers never see half).
    Table("Results", PK, SK),
)

BUCKETS: tuple[Bucket, ...] = (
    # Directors' results CSVs, uploaded straight here through presigned URLs (a 50,000-row
    # file is more than a Lambda request carries comfortably), processed on arrival.
    Bucket("ResultsUploads", expire_days=30, browser_uploads=True),
)
RESULTS_UPLOAD_PREFIX = "results/"

SECRETS: tuple[Secret, ...] = (
    # Stripe's API secret key and the webhook endpoint's signing secret: one secret, one read.
    Secret(
        "PaymentProvider",
        "Racecap: Stripe secret key and webhook signing secret (set out of band)",
        fields=("secretKey", "webhookSecret"),
    ),
    # The key that signs the fairness tokens (device, queue entry, admission, challenge).
    Secret(
        "FairnessSigningKey",
        "Racecap: the key signing device, queue and admission tokens (set out of band, 32+ random bytes)",
        fields=("signingKey",),
    ),
)


@dataclass(frozen=True)
class SmokeDirector:
    """The stage's own race director for ``make smoke``: a user of the directors' pool (TOTP
    MFA like every director) whose sign-in lives in one secret. The stack declares the user and
    the secret (username, pool, app client, a generated password); ``python -m tools.smoke
    enroll`` sets the password and adds the TOTP seed once after a deploy."""

    secret_id: str = "SmokeDirector"  # noqa: S105 - the secret's id, not its value
    # A name no mailbox answers: Cognito never mails it (the invitation is suppressed).
    username: str = "smoke-director@racecap.invalid"
    fields: tuple[str, ...] = ("username", "password", "userPoolId", "clientId", "totpSeed")

    @property
    def local_secret_name(self) -> str:
        return f"{APP_NAME}-{_kebab(self.secret_id)}"


SMOKE_DIRECTOR = SmokeDirector()

QUEUES: tuple[Queue, ...] = (
    # Paid registrations waiting to be persisted; visibility > 6x writer timeout (AWS advice).
    Queue("Registrations", visibility_timeout_s=60, max_receive_count=5),
    # Confirmation/refund emails waiting for the rate-limited SES consumer.
    Queue("Emails", visibility_timeout_s=60, max_receive_count=8),
)

# Every function gets the same validated environment (one Settings model); what it may
# *do* with those names is limited by its grants, one role per function.
COMMON_ENV: dict[str, Ref] = {
    "RACES_TABLE": TableName("Races"),
    "INVENTORY_TABLE": TableName("Inventory"),
    "REGISTRATIONS_TABLE": TableName("Registrations"),
    "AUDIT_TABLE": TableName("Audit"),
    "REGISTRATIONS_QUEUE_URL": QueueUrl("Registrations"),
    "EMAILS_QUEUE_URL": QueueUrl("Emails"),
    "CACHE_URL": CacheUrl(),
    "EMAIL_FROM": Param("EmailFrom", "Racecap <no-reply@racecap.example>"),
    "EMAIL_SEND_RATE_PER_SECOND": Param("EmailSendRatePerSecond", "10"),
    # Stripe: the API base the official SDK calls (locally the stand-in, local/stripe_standin)
    # and the secret holding its keys; only functions granted ReadSecret may read it.
    "PAYMENTS_API_BASE": Param("PaymentsApiBase", "https://api.stripe.com"),
    "PAYMENTS_SECRET_ID": SecretId("PaymentProvider"),
    # Requests per second to the provider, for all functions together (a Redis limiter, with
    # 10 % headroom inside): below Stripe's own limit (test mode 25/s; live ~100/s, or what
    # Stripe raised it to before a big opening — docs/payments.md, "Stripe's own limit").
    "PAYMENTS_RATE_PER_SECOND": Param("PaymentsRatePerSecond", "24"),
    # ... and per endpoint (Stripe's limit on each, 25/s unless raised, less the same headroom):
    # creating intents tops out here whatever the account allows. Endpoints Stripe raised, as
    # "POST /v1/payment_intents=80,GET /v1/payment_intents/:id=80" (none by default).
    "PAYMENTS_ENDPOINT_RATE_PER_SECOND": Param("PaymentsEndpointRatePerSecond", "24"),
    "PAYMENTS_ENDPOINT_RATES": Param("PaymentsEndpointRates", ""),
    # Where the runner site is served (the distribution's address, or the race site's own domain):
    # the links in emails lead there. A parameter, not the distribution's attribute: the
    # distribution's origin is the API, whose functions would then depend on it (a cycle).
    "SITE_URL": Param("RunnerSiteUrl", "https://racecap.example"),
    # The site's card form: Stripe.js and the account's publishable key (public, not secrets).
    "PAYMENTS_PUBLISHABLE_KEY": Param("PaymentsPublishableKey", "set-the-publishable-key-after-deploy"),
    "PAYMENTS_SCRIPT_URL": Param("PaymentsScriptUrl", "https://js.stripe.com/v3/"),
    # Per-address token buckets on the runner API: requests per second, and the burst a
    # page load (a dozen calls) and a few quick retries fit in.
    "RATE_LIMIT_PER_SECOND": Param("RunnerRateLimitPerSecond", "5"),
    "RATE_LIMIT_BURST": Param("RunnerRateLimitBurst", "30"),
    # What one subscriber's network is, for the rate limits and the per-address hold ceiling:
    # an IPv4 address alone, an IPv6 address by its /64 (a home line is given at least that
    # much, so its owner can send each request from a new address). Not stage parameters:
    # changing them changes every per-address key mid-opening.
    "ADDRESS_IPV4_PREFIX": "32",
    "ADDRESS_IPV6_PREFIX": "64",
    # The secret whose signingKey signs device, queue and admission tokens (racecap.fairness.keys).
    "FAIRNESS_KEY_SECRET_ID": SecretId("FairnessSigningKey"),
    # Checked at the edge of every API handler (racecap.http): only CloudFront knows it.
    "ORIGIN_VERIFY_SECRET": OriginSecret(),
    # The backstop for a registration message lost after the queue accepted it: a paid hold
    # still unconfirmed this long after it was queued is re-sent to the writer (idempotent).
    # Longer than the writer's backlog in a normal opening, so a busy minute is not a loss.
    "REQUEUE_UNCONFIRMED_AFTER_SECONDS": Param("RequeueUnconfirmedAfterSeconds", "300"),
    "POWERTOOLS_METRICS_NAMESPACE": "Racecap",
    "POWERTOOLS_LOG_LEVEL": "INFO",
    # pydantic otherwise scans every installed distribution's entry points for plugins when
    # it builds its first validator: ~13 ms of a cold start, for plugins Racecap has none of.
    "PYDANTIC_DISABLE_PLUGINS": "__all__",
}

# The most warm environments the registration API keeps ready during an opening.
REGISTRATION_WARM_MAX = 200

# How long a waitlist offer waits for its runner: "0" means each event's own window (its
# director's hours); a number of seconds replaces it on a test stage (tests/integration).
OFFER_WINDOW = Param("WaitlistOfferWindowSeconds", "0")


FUNCTIONS: tuple[Function, ...] = (
    Function(
        "PublicApi",
        "functions/public_api",
        "Runner-facing race pages and the OpenAPI document",
        grants=(TableAccess("Races", "read"), TableAccess("Inventory", "read")),
        warm_start="snapstart",
        memory_mb=1024,
    ),
    Function(
        "RegistrationApi",
        "functions/registration_api",
        "Holds, registration + payment, payment webhooks, registration status",
        grants=(
            TableAccess("Races", "read"),
            TableAccess("Inventory", "readwrite"),
            TableAccess("Registrations", "readwrite"),  # the webhook: outside refunds, disputes
            TableAccess("Audit", "readwrite"),  # the webhook: a refund made outside Racecap is audited
            QueueAccess("Registrations", "send"),
            QueueAccess("Emails", "send"),  # the webhook: refund emails
            ReadSecret("PaymentProvider"),  # creates intents, verifies webhooks
            ReadSecret("FairnessSigningKey"),  # checks device and admission tokens
        ),
        warm_start="provisioned",
        provisioned_max=REGISTRATION_WARM_MAX,
        memory_mb=1024,
    ),
    Function(
        "QueueApi",
        "functions/queue_api",
        "The opening's waiting room: device tokens, proof-of-work challenges, joining, places, now serving",
        grants=(
            TableAccess("Races", "read"),
            TableAccess("Inventory", "readwrite"),  # the queue's state, places and spent challenges
            ReadSecret("FairnessSigningKey"),  # signs device, queue and admission tokens
        ),
        # No warm start (docs/cold-starts.md): a cold start here costs a runner a fraction of a
        # second of a wait counted in minutes, and none of their place (before the opening the
        # order is a lottery); SnapStart's idle cache would put the idle stage over its budget.
        memory_mb=1024,
    ),
    Function(
        "MyRegistrationApi",
        "functions/my_registration_api",
        "A runner's own entry from their email's link: find it, see it, correct it, move it, cancel it; "
        "a sold-out event's waitlist: join, confirm, place, leave",
        grants=(
            TableAccess("Races", "read"),
            # email claims, stocked options, holds, stats; waitlist entries and spent challenges
            TableAccess("Inventory", "readwrite"),
            TableAccess("Registrations", "readwrite"),  # edits, the address, cancellations
            TableAccess("Audit", "readwrite"),  # every change is audited (no address in it)
            QueueAccess("Emails", "send"),  # the link, the email change, the refund and waitlist emails
            ReadSecret("PaymentProvider"),  # refunds under the race's policy
            ReadSecret("FairnessSigningKey"),  # the links' tokens; the waitlist's proof-of-work
        ),
        # No warm start: a few requests at a time, days after an opening (cold starts are the
        # opening function's problem, and this function is out of its way: see its handler).
        memory_mb=1024,
        extra_env={"WAITLIST_OFFER_WINDOW_SECONDS": OFFER_WINDOW},  # an offer declined is passed on at once
    ),
    Function(
        "RegistrationWriter",
        "functions/registration_writer",
        "Persists paid registrations from the queue, assigns bibs, enqueues email",
        grants=(
            TableAccess("Races", "read"),
            TableAccess("Inventory", "readwrite"),
            TableAccess("Registrations", "readwrite"),
            QueueAccess("Registrations", "consume"),
            QueueAccess("Emails", "send"),
        ),
        # Lambda wants the queue's visibility timeout (60 s) at least 6 x this + the batching window.
        timeout_s=9,
        reserved_concurrency=4,
    ),
    Function(
        "EmailSender",
        "functions/email_sender",
        "Sends queued emails through SES without exceeding the account's send rate",
        grants=(
            # The delivery log, beside each registration; and "find my registration": the sender
            # reads the registration the race's email claim names (registration.links says why
            # there, not in the API), and signs the link with the fairness tokens' key.
            TableAccess("Registrations", "readwrite"),
            TableAccess("Inventory", "read"),
            QueueAccess("Emails", "consume"),
            SendEmail(),
            ReadSecret("FairnessSigningKey"),
        ),
        timeout_s=10,
        reserved_concurrency=2,
    ),
    Function(
        "HoldSweeper",
        "functions/hold_sweeper",
        "Returns the places of expired holds to the pool; reconciles payments and refunds with the provider",
        grants=(
            TableAccess("Races", "read"),
            TableAccess("Inventory", "readwrite"),
            TableAccess("Registrations", "readwrite"),  # settles refunds waiting for the provider's word
            TableAccess("Audit", "readwrite"),  # a refund the provider failed, or a cancellation finished
            QueueAccess("Registrations", "send"),  # a paid hold found at expiry or by reconciliation
            QueueAccess("Emails", "send"),  # the email that goes with an automatic refund or cancellation
            ReadSecret("PaymentProvider"),  # cancels an expiring hold's payment; lists payments and refunds
            ReadSecret("FairnessSigningKey"),  # signs the claim link of a waitlist offer (racecap.waitlist.offers)
        ),
        # A refund with no answer yet is looked for at the provider once it is this old: longer
        # than its own request can take (~22.5 s with the SDK's retries). Its key makes an
        # earlier look harmless (the tests' stacks look after a few seconds), only wasteful.
        extra_env={
            "REFUND_SETTLE_AFTER_SECONDS": Param("RefundSettleAfterSeconds", "30"),
            "WAITLIST_OFFER_WINDOW_SECONDS": OFFER_WINDOW,
        },
        timeout_s=60,
        reserved_concurrency=1,
    ),
    Function(
        "RetentionPurge",
        "functions/retention_purge",
        "Deletes runners' personal data once a race's retention period is over",
        grants=(
            TableAccess("Races", "readwrite"),  # finds due races (a scan), marks them purged
            TableAccess("Inventory", "readwrite"),  # deletes email claims and holds
            TableAccess("Registrations", "readwrite"),  # empties emails, dates of birth, payment ids
            TableAccess("Audit", "readwrite"),  # the deletion is audited; old entries' addresses scrubbed, once
        ),
        # A run stops 20 s before this and the next hour's run goes on (a 50,000-runner race
        # is ~150,000 item writes); one at a time, since two would only redo each other's work.
        timeout_s=900,
        reserved_concurrency=1,
    ),
    Function(
        "BallotDraw",
        "functions/ballot_draw",
        "Draws each ballot whose time has come and lines its applications up as the event's waitlist",
        grants=(
            TableAccess("Races", "read"),
            TableAccess("Inventory", "readwrite"),  # applications, the draw's pages, the line, the shards
            QueueAccess("Emails", "send"),  # each runner's result ("you are number N on the waitlist")
        ),
        # A million applications' ids and the sort fit in a few hundred MB (docs/ballot.md);
        # above 1,769 MB a function has a whole vCPU for the sort. A run stops 30 s before its
        # timeout and the next minute's goes on; one at a time, as two would redo each other's work.
        memory_mb=2048,
        timeout_s=900,
        reserved_concurrency=1,
    ),
    Function(
        "WindowTasks",
        "functions/window_tasks",
        "Tasks of the registration-window workflow: warm, pre-warm, open, cool down, close",
        grants=(
            TableAccess("Races", "readwrite"),
            TableAccess("Inventory", "readwrite"),
            ScaleWarmStart("RegistrationApi"),  # the pre-warm before an opening, undone after it
            QueueAccess("Emails", "send"),  # the closing: "the waitlist has closed", to each runner waiting
        ),
        timeout_s=30,
        extra_env={
            "WARM_START_TARGET": WarmStartTarget("RegistrationApi"),
            "WARM_START_MAX": str(REGISTRATION_WARM_MAX),
        },
    ),
    Function(
        "AdminApi",
        "functions/admin_api",
        "Race directors: races and events, the registration window, stats, participants, refunds",
        grants=(
            TableAccess("Races", "readwrite"),
            TableAccess("Inventory", "readwrite"),  # cap shards, holds, email claims, stats
            TableAccess("Registrations", "readwrite"),  # cancellations
            TableAccess("Audit", "readwrite"),
            QueueAccess("Emails", "send"),  # refund emails
            StartExecution("RegistrationWindow"),
            StopExecution("RegistrationWindow"),
            ReadSecret("PaymentProvider"),  # refunds
        ),
        # No SnapStart: directors are not a burst, and its cache is billed every idle hour
        # (it kept the idle stage over the $30/month budget).
        memory_mb=1024,
        # Just under the HTTP API's 30 s integration limit: the CSV export uses the time.
        timeout_s=29,
        extra_env={"WINDOW_STATE_MACHINE_ARN": StateMachineArn("RegistrationWindow")},
    ),
)

# The function whose environment names every table, queue and secret the audit of a
# deployed stage reads (``python -m tools.audit --stage``, stack output AuditFunctionName).
AUDIT_FUNCTION = "AdminApi"

_RESULTS_ENV: dict[str, Ref] = {
    "RESULTS_TABLE": TableName("Results"),
    "RESULTS_BUCKET": BucketName("ResultsUploads"),
}
FUNCTIONS += (
    Function(
        "ResultsApi",
        "functions/results_api",
        "Runners: published results pages, a runner's result, name/bib autocomplete",
        grants=(TableAccess("Races", "read"), TableAccess("Results", "read")),
        warm_start="snapstart",
        memory_mb=1024,
        extra_env=_RESULTS_ENV,
    ),
    Function(
        "ResultsAdmin",
        "functions/results_admin",
        "Race directors: results upload URLs, upload reports, publish and unpublish",
        grants=(
            TableAccess("Races", "read"),
            TableAccess("Results", "readwrite"),
            TableAccess("Audit", "readwrite"),
            BucketAccess("ResultsUploads", "put", RESULTS_UPLOAD_PREFIX),
        ),
        extra_env=_RESULTS_ENV,
        # No SnapStart: directors are not a burst, and its cache is billed every idle hour
        # (it kept the idle stage over the $30/month budget).
    ),
    Function(
        "ResultsProcessor",
        "functions/results_processor",
        "Validates an uploaded results CSV line by line and installs it as a new version",
        grants=(
            TableAccess("Races", "read"),
            TableAccess("Registrations", "read"),
            TableAccess("Results", "readwrite"),
            TableAccess("Audit", "readwrite"),
            BucketAccess("ResultsUploads", "read", RESULTS_UPLOAD_PREFIX),
        ),
        memory_mb=1769,  # one full vCPU: 50,000 rows are parsed, checked and ranked in one go
        timeout_s=300,
        # One file at a time per event is what directors do; a few at once is plenty.
        reserved_concurrency=4,
        extra_env=_RESULTS_ENV,
    ),
)

_RESULTS_ADMIN_ROUTES: tuple[tuple[Literal["GET", "POST"], str], ...] = (
    ("GET", ""),
    ("POST", "/uploads"),
    ("GET", "/uploads/{uploadId}"),
    ("POST", "/publish"),
    ("POST", "/unpublish"),
)

# The race directors' admin API: every route behind the JWT authorizer.
_ADMIN_ROUTES: tuple[tuple[Literal["GET", "POST", "PATCH", "PUT", "DELETE"], str], ...] = (
    ("GET", "/races"),
    ("POST", "/races"),
    ("GET", "/races/{raceId}"),
    ("PATCH", "/races/{raceId}"),
    ("POST", "/races/{raceId}/events"),
    ("PATCH", "/races/{raceId}/events/{eventId}"),
    ("POST", "/races/{raceId}/copy"),
    ("POST", "/races/{raceId}/publish"),
    ("POST", "/races/{raceId}/unpublish"),
    ("GET", "/races/{raceId}/window"),
    ("POST", "/races/{raceId}/window/schedule"),
    ("POST", "/races/{raceId}/window/open"),
    ("POST", "/races/{raceId}/window/close"),
    ("GET", "/races/{raceId}/stats"),
    ("GET", "/races/{raceId}/pulse"),
    ("GET", "/races/{raceId}/pulse/csv"),
    ("GET", "/races/{raceId}/registrations"),
    ("GET", "/races/{raceId}/registrations/export"),
    ("GET", "/races/{raceId}/registrations/{registrationId}"),
    ("POST", "/races/{raceId}/registrations/{registrationId}/cancel"),
    ("POST", "/races/{raceId}/registrations/{registrationId}/refunds"),
    ("GET", "/races/{raceId}/audit"),
    ("GET", "/races/{raceId}/fairness"),
    ("PATCH", "/races/{raceId}/fairness"),
    ("POST", "/races/{raceId}/queue/pause"),
    ("POST", "/races/{raceId}/queue/resume"),
    ("GET", "/races/{raceId}/events/{eventId}/questions"),
    ("PUT", "/races/{raceId}/events/{eventId}/questions"),
    ("GET", "/races/{raceId}/events/{eventId}/questions/{version}"),
    ("GET", "/races/{raceId}/codes"),
    ("POST", "/races/{raceId}/codes"),
    ("POST", "/races/{raceId}/codes/bulk"),
    # An event's waitlist (racecap.waitlist): the list, removing someone, closing, releasing places.
    ("GET", "/races/{raceId}/events/{eventId}/waitlist"),
    ("DELETE", "/races/{raceId}/events/{eventId}/waitlist/entries/{entryId}"),
    ("POST", "/races/{raceId}/events/{eventId}/waitlist/close"),
    ("POST", "/races/{raceId}/events/{eventId}/waitlist/release"),
    ("GET", "/races/{raceId}/waitlist/export"),  # every event's list as CSV
    # An event's ballot (racecap.ballot): its settings and commitment, the applications counted.
    ("GET", "/races/{raceId}/events/{eventId}/ballot"),
    ("PUT", "/races/{raceId}/events/{eventId}/ballot"),
    ("GET", "/races/{raceId}/events/{eventId}/ballot/export"),  # its applications as CSV
)

ROUTES: tuple[Route, ...] = (
    Route("GET", "/api/races", "PublicApi"),
    Route("GET", "/api/races/{raceId}", "PublicApi"),
    Route("GET", "/api/races/{raceId}/events/{eventId}/questions", "PublicApi"),
    Route("GET", "/api/docs", "PublicApi"),
    Route("GET", "/api/docs/{asset}", "PublicApi"),  # the docs page's script and style files
    Route("POST", "/api/races/{raceId}/events/{eventId}/holds", "RegistrationApi"),
    Route("POST", "/api/races/{raceId}/events/{eventId}/holds/guaranteed", "RegistrationApi"),
    Route("POST", "/api/races/{raceId}/events/{eventId}/teams", "RegistrationApi"),
    Route("POST", "/api/holds/{holdId}/team", "RegistrationApi"),
    Route("GET", "/api/holds/{holdId}", "RegistrationApi"),
    Route("DELETE", "/api/holds/{holdId}", "RegistrationApi"),
    Route("POST", "/api/holds/{holdId}/payment", "RegistrationApi"),
    Route("PUT", "/api/holds/{holdId}/code", "RegistrationApi"),
    Route("DELETE", "/api/holds/{holdId}/code", "RegistrationApi"),
    Route("POST", "/api/holds/{holdId}/registration", "RegistrationApi"),
    Route("POST", "/api/holds/{holdId}/payment/confirm", "RegistrationApi"),
    # Stripe's webhook deliveries (signed; no per-address rate limit: Stripe sends from few addresses).
    Route("POST", "/api/payments/webhook", "RegistrationApi"),
    Route("GET", "/api/registrations/{registrationId}", "RegistrationApi"),
    # The opening's waiting room: a function of its own, so its polls never take the environments
    # an opening needs for holds and payments (functions/queue_api/handler.py).
    Route("POST", "/api/device", "QueueApi"),
    Route("GET", "/api/races/{raceId}/queue", "QueueApi"),
    Route("POST", "/api/races/{raceId}/queue", "QueueApi"),
    Route("POST", "/api/races/{raceId}/queue/challenge", "QueueApi"),
    Route("GET", "/api/races/{raceId}/queue/now-serving", "QueueApi"),
    # A runner's own entry: "find my registration", then what the emailed link opens.
    Route("POST", "/api/races/{raceId}/registration-link", "MyRegistrationApi"),
    Route("GET", "/api/my/registration", "MyRegistrationApi"),
    Route("PATCH", "/api/my/registration", "MyRegistrationApi"),
    Route("GET", "/api/my/registration/cancellation", "MyRegistrationApi"),
    Route("POST", "/api/my/registration/cancellation", "MyRegistrationApi"),
    Route("POST", "/api/my/registration/email", "MyRegistrationApi"),
    Route("POST", "/api/my/registration/email/confirm", "MyRegistrationApi"),
    Route("GET", "/api/my/registration/transfer", "MyRegistrationApi"),
    Route("POST", "/api/my/registration/transfer", "MyRegistrationApi"),
    Route("GET", "/api/my/registration/switch", "MyRegistrationApi"),
    Route("POST", "/api/my/registration/switch", "MyRegistrationApi"),
    Route("DELETE", "/api/my/registration/switch", "MyRegistrationApi"),
    Route("POST", "/api/my/registration/switch/confirm", "MyRegistrationApi"),
    Route("GET", "/api/my/registration/deferral", "MyRegistrationApi"),
    Route("POST", "/api/my/registration/deferral", "MyRegistrationApi"),
    Route("DELETE", "/api/my/registration/transfer", "MyRegistrationApi"),
    Route("POST", "/api/transfers/offer", "MyRegistrationApi"),
    Route("POST", "/api/transfers/accept", "MyRegistrationApi"),
    Route("POST", "/api/transfers/confirm", "MyRegistrationApi"),
    # An event's waitlist: join a sold-out event's list, confirm from the emailed link, my place,
    # leave. MyRegistrationApi's too: a few at a time after a sell-out, out of the opening's
    # function (its cold starts would carry the waitlist's init for nothing).
    Route("POST", "/api/races/{raceId}/events/{eventId}/waitlist", "MyRegistrationApi"),
    Route("POST", "/api/waitlist/confirm", "MyRegistrationApi"),
    Route("GET", "/api/waitlist/me", "MyRegistrationApi"),
    Route("DELETE", "/api/waitlist/me", "MyRegistrationApi"),
    # A place offered from the waitlist: see it, claim it (a hold through its own path), pass it on.
    Route("POST", "/api/waitlist/offer", "MyRegistrationApi"),
    Route("POST", "/api/waitlist/offer/claim", "MyRegistrationApi"),
    Route("POST", "/api/waitlist/offer/decline", "MyRegistrationApi"),
    # An event's ballot: apply (alone or as a group), confirm from the emailed link, see, withdraw.
    # MyRegistrationApi's too: a window's first minute is a burst, but of applications that need
    # none of the opening's holds, and the opening's function stays free of the ballot's init.
    Route("POST", "/api/races/{raceId}/events/{eventId}/ballot", "MyRegistrationApi"),
    Route("POST", "/api/ballot/confirm", "MyRegistrationApi"),
    Route("GET", "/api/ballot/me", "MyRegistrationApi"),
    Route("DELETE", "/api/ballot/me", "MyRegistrationApi"),
    # A ballot's draw as published: the seed, the figures, and the list's pages to check it with.
    Route("GET", "/api/races/{raceId}/events/{eventId}/ballot/draw", "MyRegistrationApi"),
    Route("GET", "/api/races/{raceId}/events/{eventId}/ballot/list", "MyRegistrationApi"),
    Route("GET", "/api/openapi.json", "PublicApi"),
    *(Route(method, f"/api/admin{path}", "AdminApi", auth="director") for method, path in _ADMIN_ROUTES),
    # Results: the short-cached pointer per race, then immutable versioned answers.
    Route("GET", "/api/races/{raceId}/results", "ResultsApi"),
    Route("GET", "/api/races/{raceId}/events/{eventId}/results/{version}", "ResultsApi"),
    Route("GET", "/api/races/{raceId}/events/{eventId}/results/{version}/search", "ResultsApi"),
    Route("GET", "/api/races/{raceId}/events/{eventId}/results/{version}/bibs/{bib}", "ResultsApi"),
    Route("GET", "/api/races/{raceId}/events/{eventId}/results/{version}/teams", "ResultsApi"),
    *(
        Route(method, f"/api/admin/races/{{raceId}}/events/{{eventId}}/results{path}", "ResultsAdmin", auth="director")
        for method, path in _RESULTS_ADMIN_ROUTES
    ),
    # The catch-all: API Gateway answers an unknown route itself ({"message":"Not Found"},
    # a shape the contract cannot change on an HTTP API). Routing every other path and
    # method under /api here instead lets PublicApi answer 404, or 405 with `Allow`, in
    # the contract's shape. API Gateway always prefers a more specific route.
    Route("ANY", "/api/{proxy+}", "PublicApi"),
)

OBJECT_TRIGGERS: tuple[ObjectTrigger, ...] = (
    ObjectTrigger("ResultsProcessor", "ResultsUploads", prefix=RESULTS_UPLOAD_PREFIX, suffix=".csv"),
)

# What the edge caches (CloudFront on AWS, nginx locally), most specific first.
CACHE_BEHAVIOURS: tuple[CacheBehaviour, ...] = (
    # Results: versioned answers carry long lifetimes, the pointer a few seconds; the
    # query string (page, size, filters, the typed prefix) is part of the key.
    CacheBehaviour("/api/races/*/results*", "api", cached=True, query_in_key=True),
    # The opening queue's "now serving": one figure for every waiting runner, about a
    # second (its Cache-Control); no query string, no header in the key.
    CacheBehaviour("/api/races/*/queue/now-serving", "api", cached=True, max_ttl_s=1),
    # An event's registration questions: the same for every runner, read by every hold page,
    # about two seconds (its Cache-Control), so a burst's hold pages cost the origin nothing
    # per runner; a director's edit shows within that.
    CacheBehaviour("/api/races/*/events/*/questions", "api", cached=True, max_ttl_s=2),
    # Everything else under /api is per runner or live: never cached at the edge.
    CacheBehaviour("/api/*", "api", cached=False),
    # The site: fingerprinted assets forever, index.html briefly (its own headers).
    CacheBehaviour("*", "site", cached=True),
)

QUEUE_TRIGGERS: tuple[QueueTrigger, ...] = (
    # Up to a second's registrations per invocation (issue 14): one transaction confirms up
    # to 48 of an event, so at a burst's rates a registration costs a fraction of a write
    # instead of one, and two writers rarely reach for one bib counter at once. A second is
    # well inside the waiting screen's first poll (10 s). 2 is the mapping's minimum.
    QueueTrigger("RegistrationWriter", "Registrations", batch_size=50, max_concurrency=2, max_batching_window_s=1),
    # Emails are not waited for: up to two seconds' worth per invocation rather than the one
    # or two that are there at each look, fewer invocations, receives and deletes per email
    # (issue 14). 6 x its timeout (10 s) + 2 s stays inside the queue's 60 s visibility.
    QueueTrigger("EmailSender", "Emails", batch_size=10, max_concurrency=2, max_batching_window_s=2),
)

SCHEDULES: tuple[Schedule, ...] = (
    Schedule("SweepExpiredHolds", "HoldSweeper", every_minutes=1),
    Schedule("PurgePersonalData", "RetentionPurge", every_minutes=60),
    Schedule("DrawBallots", "BallotDraw", every_minutes=1),
)

STATE_MACHINES: tuple[StateMachine, ...] = (
    StateMachine(
        "RegistrationWindow",
        "statemachines/registration_window.asl.json",
        substitutions={"WindowTasksFunctionArn": FunctionArn("WindowTasks")},
    ),
)


# ---------------------------------------------------------------------------
# Look-ups
# ---------------------------------------------------------------------------
def table(table_id: str) -> Table:
    return _one(TABLES, table_id)


def queue(queue_id: str) -> Queue:
    return _one(QUEUES, queue_id)


def secret(secret_id: str) -> Secret:
    return _one(SECRETS, secret_id)


def bucket(bucket_id: str) -> Bucket:
    return _one(BUCKETS, bucket_id)


def function(function_id: str) -> Function:
    return _one(FUNCTIONS, function_id)


def state_machine(sm_id: str) -> StateMachine:
    return _one(STATE_MACHINES, sm_id)


def param(name: str) -> Param:
    """The deploy parameter ``name`` as the environment declares it (one default)."""
    for ref in [*COMMON_ENV.values(), *(v for fn in FUNCTIONS for v in fn.extra_env.values())]:
        if isinstance(ref, Param) and ref.name == name:
            return ref
    raise KeyError(name)


def routes_for(function_id: str) -> tuple[Route, ...]:
    return tuple(r for r in ROUTES if r.function == function_id)


def async_failure_queues() -> dict[str, str]:
    """Every AWS-only queue where Lambda parks an asynchronous invocation that failed (a
    schedule's tick, an S3 event), by queue id -> the function invoked. Each is alarmed like
    a dead-letter queue."""
    return {s.failures_queue_id: s.function for s in SCHEDULES} | {
        t.failures_queue_id: t.function for t in OBJECT_TRIGGERS
    }


def function_env(fn: Function) -> dict[str, Ref]:
    return {**COMMON_ENV, "POWERTOOLS_SERVICE_NAME": _kebab(fn.id), **fn.extra_env}


def _one(items: tuple, ident: str):  # type: ignore[no-untyped-def]
    for item in items:
        if item.id == ident:
            return item
    raise KeyError(ident)
