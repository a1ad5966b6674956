"""The runners' API, one router per capability (``functions/registration_api`` includes them):
holds, the opening queue, discount codes, registration and its payment step, the provider's
webhook; ``common`` holds what several need (the calling client, the provider-busy answer)."""
