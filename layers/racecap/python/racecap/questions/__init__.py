"""Registration questions: what a race asks its runners beyond email, name and date of birth.

    models.py     the API's shapes: a director's question set, what the runner is asked
    countries.py  ISO 3166-1 alpha-2 codes (the country kind's answers)
    rules.py      pure: a set checked as a whole, built-ins expanded, answers checked
    store.py      the versions in DynamoDB (Races table), behind the ``QuestionStore`` port
    service.py    the use cases: a director saves a version, runners read the current one
                  (through the cache), the registration checks its answers against it
    wiring.py     the composition root of the capability

Every save is a new, immutable version; a registration keeps the version it answered, so
editing the questions later never makes a stored answer unreadable.
"""
