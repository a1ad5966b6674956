"""The runner-facing site: a private S3 bucket behind CloudFront (origin access
control), with ``/api/*`` sent uncached to the HTTP API, so the browser sees one origin
exactly as it does on the local gateway.

The site is built at synth time by ``site/build.py`` (stdlib only) into ``.build/site``:
every asset under a content-fingerprinted name, and ``asset-manifest.json`` saying which
``Cache-Control`` each file gets (RunSignUp paper, section 1.9.1). One ``BucketDeployment``
per cache class uploads exactly the files of this build with that header:

* fingerprinted assets (``app.<sha256-8>.js``): ``public, max-age=31536000, immutable``,
  uploaded first and never pruned, so pages already open in a browser keep loading
  the modules of the deploy they came from;
* ``index.html`` (and the build's JSON reports): short-cached, uploaded after the assets
  they point at, then invalidated at the edge so a deploy shows within seconds.

CloudFront's optimized cache policy honours those origin headers (browsers and edge alike).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

import blueprint

from .. import constants as c
from ..scanners import suppress

WHY_LOG_BUCKET_UNVERSIONED = "Access logs are written once and expire after 90 days: versions would only add cost."
WHY_LOG_BUCKET_NOT_LOGGED = "This is the access-log bucket itself: logging it would log the logging."
WHY_DEFAULT_CERT = (
    "Served on the default *.cloudfront.net certificate, whose TLS policy cannot be pinned; set a custom domain "
    "+ ACM certificate with TLSv1.2_2021 before production (the origin side is TLS 1.2 already)."
)
NONCURRENT_EXPIRY_DAYS = 30

MANIFEST = "asset-manifest.json"
ASSETS_DEPLOYMENT_ID = "AssetsDeployment"


class SiteBuildError(RuntimeError):
    """The site cannot be built (see ``site/build.py``) or is over its page-weight budget."""


def _build_module() -> ModuleType:
    name = "racecap_site_build"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, c.SITE_SOURCE_DIR / "build.py")
        if spec is None or spec.loader is None:
            raise SiteBuildError(f"cannot load {c.SITE_SOURCE_DIR / 'build.py'}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
    return sys.modules[name]


def build_site(out: Path = c.SITE_BUILD_DIR) -> dict[str, str]:
    """Build the site into ``out``; return ``{file: Cache-Control}`` for every file of the build."""
    build = _build_module()
    try:
        weights = build.build(c.SITE_SOURCE_DIR, out)
    except build.BuildError as exc:
        raise SiteBuildError(f"site build failed: {exc}") from exc
    over = [page for page, w in weights["pages"].items() if not w["withinBudget"]]
    if over:
        raise SiteBuildError(f"site pages over the {weights['budgetBytes']:,} B budget: {', '.join(over)}")
    manifest = json.loads((out / MANIFEST).read_text())
    cache_control: dict[str, str] = manifest["cacheControl"]
    return cache_control


class Site(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        api: apigw.HttpApi,
        origin_secret: secretsmanager.ISecret,
        web_acl_arn: str | None,
        console_config: dict[str, str],
        console_origins: blueprint.ConsoleOrigins,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.access_logs = s3.Bucket(
            self,
            c.ACCESS_LOG_BUCKET_ID,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            # CloudFront standard logging writes with ACLs.
            object_ownership=s3.ObjectOwnership.OBJECT_WRITER,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(c.ACCESS_LOG_EXPIRY_DAYS))],
            removal_policy=RemovalPolicy.RETAIN,
        )
        suppress(self.access_logs, "checkov", "CKV_AWS_21", WHY_LOG_BUCKET_UNVERSIONED)
        suppress(self.access_logs, "checkov", "CKV_AWS_18", WHY_LOG_BUCKET_NOT_LOGGED)
        self.bucket = s3.Bucket(
            self,
            c.SITE_BUCKET_ID,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix=c.SITE_BUCKET_LOG_PREFIX,
            # An overwritten index.html (or a deleted asset) can be brought back for a month.
            versioned=True,
            lifecycle_rules=[s3.LifecycleRule(noncurrent_version_expiration=Duration.days(NONCURRENT_EXPIRY_DAYS))],
            removal_policy=RemovalPolicy.RETAIN,
        )
        api_domain = f"{api.api_id}.execute-api.{stack.region}.{stack.url_suffix}"
        self.headers_policy = self._security_headers()
        self.console_headers_policy = self._console_headers(console_origins)
        self.console_config = console_config
        self.distribution = cloudfront.Distribution(
            self,
            c.DISTRIBUTION_ID,
            comment="Racecap site and API",
            default_root_object=c.SITE_INDEX,
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                # Honours each object's Cache-Control (set per file below), compresses.
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=self.headers_policy,
            ),
            additional_behaviors=self._console_behaviour()
            | self._api_behaviours(
                origins.HttpOrigin(
                    api_domain,
                    protocol_policy=cloudfront.OriginProtocolPolicy.HTTPS_ONLY,
                    origin_ssl_protocols=[cloudfront.OriginSslPolicy.TLS_V1_2],
                    # Proves to the handlers that the request came through CloudFront
                    # (and its WAF); CloudFront replaces any such header a viewer sends.
                    custom_headers={blueprint.ORIGIN_VERIFY_HEADER: origin_secret.secret_value.unsafe_unwrap()},
                )
            ),
            # No custom error pages: they would replace the API's JSON 403/404 bodies too.
            enable_logging=True,
            log_bucket=self.access_logs,
            log_file_prefix=c.DISTRIBUTION_LOG_PREFIX,
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
            web_acl_id=web_acl_arn,
        )
        suppress(self.distribution, "checkov", "CKV_AWS_174", WHY_DEFAULT_CERT)
        self.assets_deployment, self.deployment = self._deploy(build_site())
        self.url = f"https://{self.distribution.distribution_domain_name}"

    def _console_behaviour(self) -> dict[str, cloudfront.BehaviorOptions]:
        """The director's console under ``/admin/*``: the same bucket, its own security headers
        (``blueprint.console_security_headers``), and its page for ``/admin``, ``/admin/`` and
        any path without a file name (its routes are hash-based; the local gateway does the same)."""
        prefix = blueprint.CONSOLE_PATH
        index = cloudfront.Function(
            self,
            c.CONSOLE_INDEX_FUNCTION_ID,
            comment="Racecap console: /admin and /admin/ serve admin/index.html",
            runtime=cloudfront.FunctionRuntime.JS_2_0,
            code=cloudfront.FunctionCode.from_inline(
                "function handler(event) {\n"
                "  var r = event.request;\n"
                f"  if (r.uri === '{prefix.rstrip('/')}') {{\n"
                "    return { statusCode: 301, statusDescription: 'Moved Permanently',\n"
                f"             headers: {{ location: {{ value: '{prefix}' }} }} }};\n"
                "  }\n"
                "  if (r.uri.endsWith('/') || r.uri.lastIndexOf('.') < r.uri.lastIndexOf('/')) {\n"
                f"    r.uri = '{prefix}index.html';\n"
                "  }\n"
                "  return r;\n"
                "}\n"
            ),
        )  # fmt: skip
        return {
            f"{prefix}*": cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=self.console_headers_policy,
                function_associations=[
                    cloudfront.FunctionAssociation(
                        function=index, event_type=cloudfront.FunctionEventType.VIEWER_REQUEST
                    )
                ],
            ),
            # The bare path too (redirected to /admin/ by the function).
            prefix.rstrip("/"): cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=self.console_headers_policy,
                function_associations=[
                    cloudfront.FunctionAssociation(
                        function=index, event_type=cloudfront.FunctionEventType.VIEWER_REQUEST
                    )
                ],
            ),
        }

    def _console_headers(self, console_origins: blueprint.ConsoleOrigins) -> cloudfront.ResponseHeadersPolicy:
        """``blueprint.console_security_headers`` as the /admin/* response headers policy."""
        return self._headers_policy(
            c.CONSOLE_HEADERS_POLICY_ID,
            "Racecap console: security headers and its CSP (blueprint.console_security_headers)",
            blueprint.console_security_headers(console_origins),
        )

    def _api_behaviours(self, api_origin: origins.HttpOrigin) -> dict[str, cloudfront.BehaviorOptions]:
        """The API's cache behaviours from ``blueprint.CACHE_BEHAVIOURS`` (in precedence order;
        the local nginx stand-in renders the same list, see ``local/edge.py``). Every viewer
        header but Host goes to the API (API Gateway routes on its own host)."""
        out: dict[str, cloudfront.BehaviorOptions] = {}
        cached = 0
        for b in blueprint.CACHE_BEHAVIOURS:
            if b.origin != "api":
                continue  # the site is the default behaviour above
            if b.cached:
                cached += 1  # one policy per cached behaviour (its own max TTL); the first keeps its id
                policy = cloudfront.CachePolicy(
                    self,
                    c.RESULTS_CACHE_POLICY_ID if cached == 1 else f"{c.RESULTS_CACHE_POLICY_ID}{cached}",
                    comment=f"{b.path_pattern}: TTL from the origin's Cache-Control, query string in the key",
                    min_ttl=Duration.seconds(0),
                    default_ttl=Duration.seconds(0),
                    max_ttl=Duration.seconds(b.max_ttl_s),
                    query_string_behavior=cloudfront.CacheQueryStringBehavior.all()
                    if b.query_in_key
                    else cloudfront.CacheQueryStringBehavior.none(),
                    header_behavior=cloudfront.CacheHeaderBehavior.none(),
                    cookie_behavior=cloudfront.CacheCookieBehavior.none(),
                    enable_accept_encoding_gzip=True,
                    enable_accept_encoding_brotli=True,
                )
            out[b.path_pattern] = cloudfront.BehaviorOptions(
                origin=api_origin,
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
                allowed_methods=cloudfront.AllowedMethods.ALLOW_GET_HEAD_OPTIONS
                if b.cached
                else cloudfront.AllowedMethods.ALLOW_ALL,
                cache_policy=policy if b.cached else cloudfront.CachePolicy.CACHING_DISABLED,
                origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
                response_headers_policy=self.headers_policy,  # the API docs page is under /api
            )
        return out

    def _security_headers(self) -> cloudfront.ResponseHeadersPolicy:
        """``blueprint.security_headers`` as a response headers policy (the local gateway
        sends the same dict): the content security policy with the payment provider's
        origins, from cdk.json context if not Stripe's."""
        origin = self.node.try_get_context(c.PAYMENT_ORIGIN_CONTEXT)
        payments = blueprint.PaymentOrigins.single(origin) if origin else blueprint.STRIPE_ORIGINS
        return self._headers_policy(
            c.SECURITY_HEADERS_POLICY_ID,
            "Racecap: security headers and the content security policy (blueprint.security_headers)",
            blueprint.security_headers(payments),
        )

    def _headers_policy(self, id: str, comment: str, headers: dict[str, str]) -> cloudfront.ResponseHeadersPolicy:
        """A blueprint headers dict (the site's or the console's) as a response headers policy:
        CloudFront sets the CSP, HSTS, nosniff, frame and referrer headers, overriding the origin's."""
        h = headers
        hsts = int(h["Strict-Transport-Security"].removeprefix("max-age="))
        referrer = cloudfront.HeadersReferrerPolicy[h["Referrer-Policy"].upper().replace("-", "_")]
        assert h["X-Content-Type-Options"] == "nosniff"
        return cloudfront.ResponseHeadersPolicy(
            self,
            id,
            comment=comment,
            security_headers_behavior=cloudfront.ResponseSecurityHeadersBehavior(
                content_security_policy=cloudfront.ResponseHeadersContentSecurityPolicy(
                    content_security_policy=h["Content-Security-Policy"], override=True
                ),
                strict_transport_security=cloudfront.ResponseHeadersStrictTransportSecurity(
                    access_control_max_age=Duration.seconds(hsts), include_subdomains=False, override=True
                ),
                content_type_options=cloudfront.ResponseHeadersContentTypeOptions(override=True),
                frame_options=cloudfront.ResponseHeadersFrameOptions(
                    frame_option=cloudfront.HeadersFrameOption[h["X-Frame-Options"]], override=True
                ),
                referrer_policy=cloudfront.ResponseHeadersReferrerPolicy(referrer_policy=referrer, override=True),
            ),
        )

    def _deploy(self, cache_control: dict[str, str]) -> tuple[s3deploy.BucketDeployment, s3deploy.BucketDeployment]:
        """Immutable assets first, then the short-cached pages that reference them."""
        groups: dict[str, list[str]] = defaultdict(list)
        for name, header in cache_control.items():
            groups[header].append(name)
        immutable = [h for h in groups if "immutable" in h]
        short = [h for h in groups if "immutable" not in h]
        if len(immutable) != 1 or len(short) != 1:
            raise SiteBuildError(f"expected one immutable and one short Cache-Control, got {sorted(groups)}")
        # The build's folder (with the console's admin/) may also hold files of no build.
        everything = sorted(
            p.relative_to(c.SITE_BUILD_DIR).as_posix() for p in c.SITE_BUILD_DIR.rglob("*") if p.is_file()
        )

        def deployment(
            construct_id: str, header: str, paths: list[str] | None = None, extra: list[s3deploy.ISource] | None = None
        ) -> s3deploy.BucketDeployment:
            wanted = set(groups[header])
            return s3deploy.BucketDeployment(
                self,
                construct_id,
                # Exactly this build's files of this class (nothing else that sits in the folder).
                sources=[
                    s3deploy.Source.asset(
                        str(c.SITE_BUILD_DIR),
                        exclude=[n for n in everything if n not in wanted],
                    ),
                    *(extra or []),
                ],
                destination_bucket=self.bucket,
                cache_control=[s3deploy.CacheControl.from_string(header)],
                prune=False,  # keep earlier deploys' assets (and never delete the other class)
                distribution=self.distribution if paths else None,
                distribution_paths=paths,
            )

        assets = deployment(ASSETS_DEPLOYMENT_ID, immutable[0])
        # The console's settings (its user pool and app client) beside its page, short-cached.
        config = s3deploy.Source.json_data(f"{blueprint.CONSOLE_PATH.strip('/')}/config.json", self.console_config)
        console_paths = [blueprint.CONSOLE_PATH, f"{blueprint.CONSOLE_PATH}config.json"]
        pages = deployment(
            c.DEPLOYMENT_ID,
            short[0],
            ["/", *console_paths, *(f"/{n}" for n in sorted(groups[short[0]]))],
            extra=[config],
        )
        pages.node.add_dependency(assets)
        return assets, pages
