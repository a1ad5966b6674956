"""``python -m local.stripe_standin --port N``: see the package docstring."""

from __future__ import annotations

import argparse
import os

from local.stripe_standin.server import Keys, serve


def main() -> None:
    parser = argparse.ArgumentParser(description="Local stand-in for the subset of Stripe's API Racecap uses.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--webhook-url", default=None, help="where signed events are POSTed (none: not delivered)")
    parser.add_argument(
        "--enabled-events",
        default="*",
        help="comma-separated event types the webhook endpoint subscribes to (Stripe's enabled_events; *: all)",
    )
    parser.add_argument(
        "--rate-limit", type=float, default=25.0, help="API requests per second, all endpoints (Stripe test mode: 25)"
    )
    parser.add_argument(
        "--endpoint-rate-limit",
        type=float,
        default=25.0,
        help="API requests per second to any one endpoint (Stripe's default: 25; 0: no limit)",
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    # Keys from the environment, never the command line (ps shows argv to every user).
    defaults = Keys()
    keys = Keys(
        secret=os.environ.get("STANDIN_SECRET_KEY", defaults.secret),
        publishable=os.environ.get("STANDIN_PUBLISHABLE_KEY", defaults.publishable),
        webhook_secret=os.environ.get("STANDIN_WEBHOOK_SECRET", defaults.webhook_secret),
    )
    server, _ = serve(
        args.port,
        keys,
        webhook_url=args.webhook_url,
        enabled_events=tuple(t.strip() for t in args.enabled_events.split(",") if t.strip()) or ("*",),
        rate_limit=args.rate_limit,
        endpoint_rate_limit=args.endpoint_rate_limit,
        verbose=args.verbose,
    )
    print(f"[stripe-standin] on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
