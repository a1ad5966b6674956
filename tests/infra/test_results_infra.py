"""Results infrastructure: the uploads bucket, its S3 event trigger, the results cache
behaviour and the functions' S3 rights — template side against the blueprint and the
local stand-ins (moto bucket, object watcher, nginx configuration)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from racecap_cdk.grants import BUCKET_ACTIONS

import blueprint
from local import edge, provision

from .conftest import TemplateView

CACHING_DISABLED = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"  # CloudFront's managed policy id


def test_the_same_buckets_with_the_same_lifecycle(view: TemplateView) -> None:
    cloud = view.tagged("AWS::S3::Bucket")
    assert set(cloud) == {b.id for b in blueprint.BUCKETS}
    for bucket in blueprint.BUCKETS:
        _, props = cloud[bucket.id]
        (rule,) = props["LifecycleConfiguration"]["Rules"]
        (local,) = provision.lifecycle_rules(bucket)
        assert rule["ExpirationInDays"] == local["Expiration"]["Days"] == bucket.expire_days
        assert rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] == 1
        assert local["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] == 1
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True,
        }  # fmt: skip


def test_object_triggers_invoke_the_declared_function_for_the_declared_keys(view: TemplateView) -> None:
    found = set()
    for lid in view.of_type("Custom::S3BucketNotifications"):
        props = view.props(lid)
        bucket = view.tag(view.ref_target(props["BucketName"]))
        for conf in props["NotificationConfiguration"]["LambdaFunctionConfigurations"]:
            rules = {r["Name"]: r["Value"] for r in conf["Filter"]["Key"]["FilterRules"]}
            fn = view.tag(view.ref_target(conf["LambdaFunctionArn"]))
            assert conf["Events"] == ["s3:ObjectCreated:*"]
            found.add((fn, bucket, rules.get("prefix", ""), rules.get("suffix", "")))
    declared = {(t.function, t.bucket, t.prefix, t.suffix) for t in blueprint.OBJECT_TRIGGERS}
    assert found == declared
    # Locally the object watcher sends the same S3 event for the same keys.
    (trigger,) = blueprint.OBJECT_TRIGGERS
    record = provision.object_event(trigger, "results/r/e/up 1.csv", 10, '"x"')["Records"][0]
    assert record["eventName"].startswith("ObjectCreated:") and record["s3"]["object"]["key"] == "results/r/e/up+1.csv"


def _statements(view: TemplateView, fn_id: str) -> list[dict[str, Any]]:
    _, fn = view.tagged("AWS::Lambda::Function")[fn_id]
    role = view.ref_target(fn["Role"])
    out = []
    for lid in view.of_type("AWS::IAM::Policy"):
        if any(view.ref_target(r) == role for r in view.props(lid).get("Roles", [])):
            out += view.props(lid)["PolicyDocument"]["Statement"]
    return out


def test_bucket_rights_are_one_action_on_one_prefix(view: TemplateView) -> None:
    for fn in blueprint.FUNCTIONS:
        s3 = [s for s in _statements(view, fn.id) if any(str(a).startswith("s3:") for a in _list(s["Action"]))]
        wanted = [g for g in fn.grants if isinstance(g, blueprint.BucketAccess)]
        assert len(s3) == len(wanted), fn.id
        for statement, grant in zip(s3, wanted, strict=True):
            assert _list(statement["Action"]) == BUCKET_ACTIONS[grant.mode]
            (resource,) = _list(statement["Resource"])
            assert resource["Fn::Join"][1][-1] == f"/{grant.prefix}*"


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_cloudfront_and_nginx_render_the_same_cache_behaviours(view: TemplateView) -> None:
    (dist,) = [view.props(lid) for lid in view.of_type("AWS::CloudFront::Distribution")]
    config = dist["DistributionConfig"]
    api = [b for b in blueprint.CACHE_BEHAVIOURS if b.origin == "api"]
    # The console's /admin behaviours serve the site's bucket (tests/infra/test_console.py).
    api_behaviours = [b for b in config["CacheBehaviors"] if not b["PathPattern"].startswith("/admin")]
    assert [b["PathPattern"] for b in api_behaviours] == [b.path_pattern for b in api]
    policies = view.of_type("AWS::CloudFront::CachePolicy")
    for cloud, decl in zip(api_behaviours, api, strict=True):
        if not decl.cached:
            assert cloud["CachePolicyId"] == CACHING_DISABLED
            continue
        policy = view.props(view.ref_target(cloud["CachePolicyId"]))["CachePolicyConfig"]
        assert policy["MinTTL"] == 0 and policy["DefaultTTL"] == 0 and policy["MaxTTL"] == decl.max_ttl_s
        keys = policy["ParametersInCacheKeyAndForwardedToOrigin"]
        assert keys["QueryStringsConfig"]["QueryStringBehavior"] == ("all" if decl.query_in_key else "none")
        assert keys["HeadersConfig"]["HeaderBehavior"] == "none"
        assert set(cloud["AllowedMethods"]) == {"GET", "HEAD", "OPTIONS"}
    assert len(policies) == sum(b.cached for b in api)  # one each: their max TTLs differ
    assert blueprint.CACHE_BEHAVIOURS[-1].path_pattern == "*"  # the default behaviour: the site

    conf = edge.render(8090, 8080, Path("/w"), Path("/l"))
    blocks = re.findall(r'location ~ "([^"]+)" \{(.*?)\n    \}', conf, flags=re.S)
    assert [regex for regex, _ in blocks] == [edge.location_regex(b.path_pattern) for b in blueprint.CACHE_BEHAVIOURS]
    for (_, body), decl in zip(blocks, blueprint.CACHE_BEHAVIOURS, strict=True):
        assert ("proxy_cache edge;" in body) == decl.cached
        assert ("proxy_cache off;" in body) == (not decl.cached)
        if decl.cached:
            assert ("$args" in body) == decl.query_in_key
            assert "proxy_cache_valid" not in body  # lifetimes come from the origin's headers
    assert re.fullmatch(edge.location_regex("/api/races/*/results*"), "/api/races/r1/events/e/results/3/search")
    assert not re.fullmatch(edge.location_regex("/api/races/*/results*"), "/api/races/r1")
