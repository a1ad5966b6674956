"""The largest team, from DynamoDB's transaction limit, and an event's team size range."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from racecap.errors import ValidationFailed
from racecap.models import Event

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
TRANSACTION_ITEMS = 100


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


@contextmanager
def member_fields(index: int) -> Iterator[None]:
    """A runner's check run for one team member: its 400 names the member's fields
    (``members.<i>.dateOfBirth``) and the member, so the captain knows whose to fix."""
    try:
        yield
    except ValidationFailed as exc:
        fields = {f"members.{index}.{k}": v for k, v in (exc.fields or {}).items()}
        raise type(exc)(f"Member {index + 1}: {exc.message}", fields=fields or None) from exc
