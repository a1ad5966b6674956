"""The site's deployment: fingerprinted assets immutable, index.html short-cached and
invalidated, assets uploaded before the page that points at them, nothing pruned."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from racecap_cdk import constants as c
from racecap_cdk.constructs.site import build_site

import blueprint

from .conftest import TemplateView

CACHING_OPTIMIZED = "658327ea-f89d-4fab-a63d-7e88639e58f6"  # AWS managed cache policy
FINGERPRINTED = re.compile(r"^.+\.[0-9a-f]{8}\.(js|css)$")


def _deployments(view: TemplateView) -> dict[str, tuple[str, dict[str, Any]]]:
    """Cache-Control -> (logical id, resource) for each of the site's bucket deployments."""
    found = {
        r["Properties"]["SystemMetadata"]["cache-control"]: (lid, r)
        for lid, r in view.of_type("Custom::CDKBucketDeployment").items()
    }
    assert len(found) == 2, sorted(found)
    return found


def test_fingerprinted_assets_are_immutable_and_the_page_is_short_cached(view: TemplateView) -> None:
    deployments = _deployments(view)
    (immutable,) = [k for k in deployments if "immutable" in k]
    (short,) = [k for k in deployments if "immutable" not in k]
    assets_lid, assets = deployments[immutable]
    pages_lid, pages = deployments[short]

    assert "max-age=31536000" in immutable
    max_age = int(re.search(r"max-age=(\d+)", short).group(1))  # type: ignore[union-attr]
    assert max_age <= 300
    # Assets first: a page never lands before the files it references.
    assert assets_lid in pages["DependsOn"]
    # Never pruned: browsers holding the previous index.html still load its modules.
    assert assets["Properties"]["Prune"] is False
    assert pages["Properties"]["Prune"] is False
    # Only the short-cached names are invalidated (fingerprinted ones are new names).
    assert "DistributionId" not in assets["Properties"]
    paths = pages["Properties"]["DistributionPaths"]
    assert {"/", f"/{c.SITE_INDEX}"} <= set(paths)
    assert not any(FINGERPRINTED.match(p.lstrip("/")) for p in paths)
    assert pages_lid != assets_lid


def test_the_edge_honours_those_headers_and_serves_index_html_at_the_root(view: TemplateView) -> None:
    (distribution,) = view.of_type("AWS::CloudFront::Distribution").values()
    config = distribution["Properties"]["DistributionConfig"]
    assert config["DefaultRootObject"] == c.SITE_INDEX
    assert config["DefaultCacheBehavior"]["CachePolicyId"] == CACHING_OPTIMIZED
    assert config["DefaultCacheBehavior"]["Compress"] is True


def test_the_build_classes_every_file(tmp_path: Path) -> None:
    cache_control = build_site(tmp_path / "site")

    assert cache_control[c.SITE_INDEX].startswith("public, max-age=60")
    assets = [name for name in cache_control if name.endswith((".js", ".css"))]
    assert assets
    for name in assets:
        assert FINGERPRINTED.match(name), name
        assert "immutable" in cache_control[name], name
    site = tmp_path / "site"
    assert set(cache_control) == {p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()}


def test_cloudfront_sends_the_blueprints_security_headers_with_its_content_security_policy(view: TemplateView) -> None:
    policy_id, policy = next(
        (lid, p)
        for lid, p in view.of_type("AWS::CloudFront::ResponseHeadersPolicy").items()
        if "blueprint.security_headers" in p["Properties"]["ResponseHeadersPolicyConfig"]["Comment"]
    )
    headers = policy["Properties"]["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    expected = blueprint.security_headers(blueprint.STRIPE_ORIGINS)
    assert headers["ContentSecurityPolicy"]["ContentSecurityPolicy"] == expected["Content-Security-Policy"]
    assert "unsafe-inline" not in expected["Content-Security-Policy"]
    assert "https://js.stripe.com" in expected["Content-Security-Policy"]
    assert headers["FrameOptions"]["FrameOption"] == expected["X-Frame-Options"]
    assert headers["StrictTransportSecurity"]["AccessControlMaxAgeSec"] == 31536000
    # Every behaviour, the API's (its docs page) included, sends them.
    (dist,) = view.of_type("AWS::CloudFront::Distribution").values()
    config = dist["Properties"]["DistributionConfig"]
    behaviours = [config["DefaultCacheBehavior"], *config.get("CacheBehaviors", [])]
    assert all("ResponseHeadersPolicyId" in b for b in behaviours)
    # … the runner site's policy on every one but the director's console (tests/infra/test_console.py).
    for b in behaviours:
        if not b.get("PathPattern", "").startswith(blueprint.CONSOLE_PATH.rstrip("/")):
            assert view.ref_target(b["ResponseHeadersPolicyId"]) == policy_id
