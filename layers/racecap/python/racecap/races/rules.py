"""Who may run an event: its age rule, measured on race day.

"Kids 1K: 4-12" and "Marathon: 18+" are about the runner's age on the day of the race, not
on the day they register: a runner 17 today and 18 on race day may enter the marathon. The
rule is the event's (``minAge``, ``maxAge``); the race page carries the numbers and the
rule's wording (``rule_text``), and the site measures the age with the same arithmetic, so
the site and the API answer alike from one rule.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Annotated
from zoneinfo import ZoneInfo

from pydantic import AfterValidator, BeforeValidator

from racecap.errors import ValidationFailed
from racecap.races.models import Event, Race

# DynamoDB takes at most 100 items in one transaction. A team's largest are:
# - starting its payment: the hold + one email claim per member + one unit per member of each
#   option with stock the members chose (a T-shirt size: one more each);
# - confirming it: one registration per member + the hold + the bib counter + two stats items;
# - its places: the hold + up to one item per cap shard (16 at most) + the client limits (2).
# With 25 members and one option with stock each, starting the payment is 1 + 25 + 25 = 51
# items, confirming 29: room to spare, and two stocked options each (76) still fit. Larger
# teams are refused when the director sets the range, and a team whose answers would take
# more than 100 items is refused (400) before anything is claimed.
MAX_TEAM_SIZE = 25


MIN_TEAM_SIZE = 2


def team_range_problem(low: int | None, high: int | None, cap: int) -> dict[str, str]:
    """What is wrong with an event's team size range, by field (empty: fine)."""
    if low is None and high is None:
        return {}
    if low is None or high is None:
        field = "teamMinSize" if low is None else "teamMaxSize"
        return {field: "Give both teamMinSize and teamMaxSize, or neither (no team entries)."}
    if low < MIN_TEAM_SIZE:
        return {"teamMinSize": f"A team has at least {MIN_TEAM_SIZE} members."}
    if high > MAX_TEAM_SIZE:
        return {"teamMaxSize": f"At most {MAX_TEAM_SIZE}: a larger team does not fit in one DynamoDB transaction."}
    if low > high:
        return {"teamMaxSize": "teamMaxSize must not be below teamMinSize."}
    if high > cap:
        return {"teamMaxSize": f"A team cannot be larger than the event's {cap} places."}
    return {}


def check_team_size(event: Event, places: int) -> None:
    """A team of ``places`` for this event: within its range, or a 400 that says the range."""
    if event.teamMinSize is None or event.teamMaxSize is None:
        raise ValidationFailed(f"{event.name} takes single entries only.", fields={"places": "No team entries."})
    if not event.teamMinSize <= places <= event.teamMaxSize:
        rule = f"{event.teamMinSize} to {event.teamMaxSize}"
        raise ValidationFailed(f"A team for {event.name} has {rule} members.", fields={"places": f"Between {rule}."})


# Without a rule of its own an event takes runners from this age on race day (the old site-wide
# minimum, now measured on race day); a director may lower it (a kids' race) or raise it.
DEFAULT_MIN_AGE = 5


MAX_AGE = 120


def age_on(born: date, day: date) -> int:
    """Whole years on ``day`` (a 29 February birthday turns a year older on 1 March)."""
    return day.year - born.year - ((day.month, day.day) < (born.month, born.day))


MAX_AGE_YEARS = 120


def strict_iso_date(v: object) -> object:
    """A date of birth as typed must be YYYY-MM-DD (pydantic would also take a number or "2001-1-5")."""
    if not isinstance(v, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
        raise ValueError("Use the form YYYY-MM-DD.")
    return v


def plausible_birth(v: date) -> date:
    """A date of birth in the past, of someone alive (a registration's, an applicant's)."""
    today = datetime.now(UTC).date()
    if v >= today:
        raise ValueError("The date of birth must be in the past.")
    if age_on(v, today) > MAX_AGE_YEARS:
        raise ValueError("Please check the year of birth.")
    return v


# A date of birth as the API takes it: YYYY-MM-DD strictly, in the past, of someone alive.
BirthDate = Annotated[date, BeforeValidator(strict_iso_date), AfterValidator(plausible_birth)]


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


DEFAULT_RETENTION_DAYS = 365


MIN_RETENTION_DAYS = 45


MAX_RETENTION_DAYS = 3650


def purge_due(race: Race) -> date:
    """The first day the race's personal data may no longer be kept."""
    try:
        return date.fromisoformat(race.raceDate) + timedelta(days=race.retentionDays)
    except OverflowError:  # a race date near 9999, stored before dates had bounds: never
        return date.max


def today_in(zone: str) -> date:
    """Today in the race's IANA zone (the runner's deadlines are its days); UTC for a zone the
    runtime does not know."""
    try:
        return datetime.now(ZoneInfo(zone)).date()
    except (KeyError, ValueError):
        return datetime.now(UTC).date()
