"""The runner-facing site: a private S3 bucket behind CloudFront (origin access
control), with ``/api/*`` sent uncached to the HTTP API, so the browser sees one origin
exactly as it does on the local gateway."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_cloudfront as cloudfront
from aws_cdk import aws_cloudfront_origins as origins
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct

from .. import constants as c


def site_dir() -> Path:
    """The built site when ``make site`` has run, else the sources as they are."""
    return c.SITE_BUILD_DIR if c.SITE_BUILD_DIR.is_dir() else c.SITE_SOURCE_DIR


class Site(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, api: apigw.HttpApi) -> None:
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
        self.bucket = s3.Bucket(
            self,
            c.SITE_BUCKET_ID,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix=c.SITE_BUCKET_LOG_PREFIX,
            removal_policy=RemovalPolicy.RETAIN,
        )
        api_domain = f"{api.api_id}.execute-api.{stack.region}.{stack.url_suffix}"
        self.distribution = cloudfront.Distribution(
            self,
            c.DISTRIBUTION_ID,
            comment="Racecap site and API",
            default_root_object=c.SITE_INDEX,
            default_behavior=cloudfront.BehaviorOptions(
                origin=origins.S3BucketOrigin.with_origin_access_control(self.bucket),
                viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
                cache_policy=cloudfront.CachePolicy.CACHING_OPTIMIZED,
                response_headers_policy=cloudfront.ResponseHeadersPolicy.SECURITY_HEADERS,
            ),
            additional_behaviors={
                # Never cached, every viewer header but Host (API Gateway routes on its own host).
                c.API_PATH_PATTERN: cloudfront.BehaviorOptions(
                    origin=origins.HttpOrigin(
                        api_domain, protocol_policy=cloudfront.OriginProtocolPolicy.HTTPS_ONLY
                    ),
                    viewer_protocol_policy=cloudfront.ViewerProtocolPolicy.HTTPS_ONLY,
                    allowed_methods=cloudfront.AllowedMethods.ALLOW_ALL,
                    cache_policy=cloudfront.CachePolicy.CACHING_DISABLED,
                    origin_request_policy=cloudfront.OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
                ),
            },
            # No custom error pages: they would replace the API's JSON 403/404 bodies too.
            enable_logging=True,
            log_bucket=self.access_logs,
            log_file_prefix=c.DISTRIBUTION_LOG_PREFIX,
            price_class=cloudfront.PriceClass.PRICE_CLASS_100,
            http_version=cloudfront.HttpVersion.HTTP2_AND_3,
        )
        self.deployment = s3deploy.BucketDeployment(
            self,
            c.DEPLOYMENT_ID,
            sources=[s3deploy.Source.asset(str(site_dir()))],
            destination_bucket=self.bucket,
            distribution=self.distribution,
            distribution_paths=["/*"],
        )
        self.url = f"https://{self.distribution.distribution_domain_name}"
