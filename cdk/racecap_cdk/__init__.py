"""Racecap's CDK constructs and stack; the app that composes them is ``racecap_cdk.app``.

Kept to this docstring: every module of the package runs this file first, so anything imported
here would be imported by every construct (``racecap_cdk.app`` imports them all).
"""
