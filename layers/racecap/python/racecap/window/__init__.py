"""The registration window: scheduled, opened and closed through Step Functions, with the
pre-warming of a big opening."""
