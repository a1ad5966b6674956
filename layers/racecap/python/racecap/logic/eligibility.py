"""Who may run an event: its age rule, measured on race day.

"Kids 1K: 4-12" and "Marathon: 18+" are about the runner's age on the day of the race, not
on the day they register: a runner 17 today and 18 on race day may enter the marathon. The
rule is the event's (``minAge``, ``maxAge``); the race page carries the numbers and the
rule's wording (``rule_text``), and the site measures the age with the same arithmetic, so
the site and the API answer alike from one rule.
"""

from __future__ import annotations

from datetime import date

from racecap.errors import ValidationFailed
from racecap.models import Event, Race

# Without a rule of its own an event takes runners from this age on race day (the old site-wide
# minimum, now measured on race day); a director may lower it (a kids' race) or raise it.
DEFAULT_MIN_AGE = 5
MAX_AGE = 120


def age_on(born: date, day: date) -> int:
    """Whole years on ``day`` (a 29 February birthday turns a year older on 1 March)."""
    return day.year - born.year - ((day.month, day.day) < (born.month, born.day))


def rule_text(min_age: int, max_age: int | None) -> str:
    if max_age is None:
        return f"ages {min_age} and over on race day"
    if min_age == max_age:
        return f"age {min_age} on race day"
    return f"ages {min_age} to {max_age} on race day"


def check_age(race: Race, event: Event, born: date) -> None:
    """Refuses (400 naming ``dateOfBirth``) a runner outside the event's rule on race day."""
    day = date.fromisoformat(race.raceDate)
    age = age_on(born, day)
    if event.minAge <= age and (event.maxAge is None or age <= event.maxAge):
        return
    message = (
        f"{event.name} is for {rule_text(event.minAge, event.maxAge)} ({day.isoformat()}); "
        f"this runner will be {age} then."
    )
    raise ValidationFailed(message, fields={"dateOfBirth": message})
