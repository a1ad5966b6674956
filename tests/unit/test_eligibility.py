"""An event's age rule is measured on race day: the API refuses a runner outside it before
anything is claimed or charged, naming the rule."""

from __future__ import annotations

from datetime import date

import pytest
from racecap.errors import ValidationFailed
from racecap.races.models import Event, Race
from racecap.races.rules import age_on, check_age, rule_text
from racecap.registration.models import RegistrationRequest

from tests.fakes.catalog import open_race
from tests.unit.core_world import World, request

RACE_DAY = "2027-05-01"


def _race_and(event_name: str, min_age: int, max_age: int | None) -> tuple[Race, Event]:
    race, (event,) = open_race(raceDate=RACE_DAY)
    return race, event.model_copy(update={"name": event_name, "minAge": min_age, "maxAge": max_age})


def test_age_is_whole_years_on_the_day_a_leap_day_birthday_turning_on_1_march():
    assert age_on(date(2015, 5, 2), date(2027, 5, 1)) == 11
    assert age_on(date(2015, 5, 1), date(2027, 5, 1)) == 12
    assert age_on(date(2008, 2, 29), date(2026, 2, 28)) == 17
    assert age_on(date(2008, 2, 29), date(2026, 3, 1)) == 18


def test_the_rule_in_words():
    assert rule_text(4, 12) == "ages 4 to 12 on race day"
    assert rule_text(18, None) == "ages 18 and over on race day"
    assert rule_text(10, 10) == "age 10 on race day"


def test_a_runner_13_on_race_day_and_12_today_is_refused_for_kids_4_to_12_naming_the_rule():
    race, kids = _race_and("Kids 1K", 4, 12)
    with pytest.raises(ValidationFailed) as refused:
        check_age(race, kids, date(2014, 4, 1))  # 12 on 2026-11-26, 13 on 2027-05-01
    assert refused.value.fields == {"dateOfBirth": refused.value.message}
    assert "Kids 1K is for ages 4 to 12 on race day (2027-05-01)" in refused.value.message
    assert "will be 13" in refused.value.message


def test_a_runner_18_on_race_day_and_17_today_is_accepted_for_the_marathon_18_plus():
    race, marathon = _race_and("Marathon", 18, None)
    check_age(race, marathon, date(2009, 3, 1))  # 17 today, 18 on race day
    with pytest.raises(ValidationFailed):
        check_age(race, marathon, date(2009, 5, 2))  # 18 the day after the race


def test_a_four_year_old_may_run_a_kids_race_under_the_old_site_wide_minimum_of_five():
    race, kids = _race_and("Kids 1K", 4, 12)
    check_age(race, kids, date(2023, 4, 30))
    assert RegistrationRequest(email="k@example.com", firstName="K", lastName="L", dateOfBirth="2023-04-30")


def test_a_runner_outside_the_rule_is_refused_before_anything_is_claimed_or_charged():
    world = World()
    race, events = open_race(raceDate=RACE_DAY)
    world.catalog.add(race, [events[0].model_copy(update={"minAge": 18})])
    hold_id = world.hold_service.hold("race-1", "ev0").holdId
    too_young = request().model_copy(update={"dateOfBirth": date(2012, 1, 1)})
    with pytest.raises(ValidationFailed) as refused:
        world.registration.register(hold_id, too_young)
    assert "dateOfBirth" in (refused.value.fields or {})
    assert world.payments.intents == [] and world.holds.get(hold_id).attempt is None
    assert world.registration.register(hold_id, request()).status == "QUEUED"  # the same hold, an adult
