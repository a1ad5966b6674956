"""The opening queue's durable state, in the Inventory table (Redis only caches it).

Layout (pk / sk):
  QUEUE#<raceId>              / STATE  the director's settings and the queue's counters:
                                       seq (arrival numbers issued), drawSize + drawSeed (the draw),
                                       anchorAt + anchorCount (where "now serving" stood at
                                       the last rate change, pause or resume);
                                       issue:<deviceId>:<replaced arrival> while an entry
                                       is being written (``next_arrival``)
  QENTRY#<raceId>#<deviceId>  / ENTRY  one device's place: its arrival number; admittedAt
                                       once it was first admitted (one per device and race)
  POW#<challengeId>           / POW    a spent proof-of-work challenge (TTL clean-up)

"Now serving" is never stored per tick: it is a function of the STATE item and the clock
(``queue.serving``), so a Redis restart, a cold start or a crash cannot move anyone's
place, and no scheduled job has to advance it.
"""

from __future__ import annotations

import secrets
import time
from decimal import Decimal
from typing import Any

from racecap.aws.items import from_item, is_conditional_failure, to_item, values
from racecap.aws.transactions import ConditionFailed, TransactItem, transact
from racecap.errors import Conflict


def state_key(race_id: str) -> dict[str, Any]:
    return to_item({"pk": f"QUEUE#{race_id}", "sk": "STATE"})


def entry_key(race_id: str, device_id: str) -> dict[str, Any]:
    return to_item({"pk": f"QENTRY#{race_id}#{device_id}", "sk": "ENTRY"})


class DynamoQueueStore:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def state(self, race_id: str) -> dict[str, Any] | None:
        resp = self._db.get_item(TableName=self._table, Key=state_key(race_id), ConsistentRead=True)
        return from_item(resp["Item"]) if "Item" in resp else None

    def save_settings(
        self, race_id: str, changes: dict[str, Any], expected_version: int, audited: list[TransactItem] | None = None
    ) -> bool:
        """Apply the director's changes if nobody else changed the state since it was read,
        in one transaction with ``audited`` (the change's audit entry)."""
        # An empty change (a PATCH with {}) still bumps the version: the SET list must not be empty.
        sets = "".join(f"#{k} = :{k}, " for k in changes)
        cond = "attribute_not_exists(pk)" if expected_version == 0 else "#version = :expected"
        update = {
            "TableName": self._table,
            "Key": state_key(race_id),
            "UpdateExpression": f"SET {sets}#version = :next",
            "ConditionExpression": cond,
            "ExpressionAttributeNames": {f"#{k}": k for k in [*changes, "version"]},
            "ExpressionAttributeValues": values(
                {
                    **{f":{k}": v for k, v in changes.items()},
                    ":next": expected_version + 1,
                    **({":expected": expected_version} if expected_version else {}),
                }
            ),
        }
        try:
            if audited:
                transact(self._db, [{"Update": update}, *audited])
            else:
                self._db.update_item(**update)
            return True
        except ConditionFailed as exc:
            if exc.first == 0:
                return False
            raise
        except self._db.exceptions.ConditionalCheckFailedException:
            return False

    def next_arrival(self, race_id: str, device_id: str, replacing: int | None) -> tuple[int, dict[str, Any]] | None:
        """Issue this entry's arrival number (with the whole state after it), or None if the
        queue is off.

        The number is bound to the entry (the device, and the arrival it replaces if it
        re-joins) in the same write that counts it: the SDK's retry of a write whose answer
        was lost finds its own number there and takes it, instead of counting again and
        leaving a number nobody holds. The binding lives only until the entry is written
        (``settle_arrival``), so the hot STATE item never grows with the queue."""
        issue = _issue_name(device_id, replacing)
        for _ in range(3):
            try:
                resp = self._db.update_item(
                    TableName=self._table,
                    Key=state_key(race_id),
                    UpdateExpression="SET seq = if_not_exists(seq, :zero) + :one, "
                    "#issue = if_not_exists(seq, :zero) + :one",
                    ConditionExpression="enabled = :yes AND attribute_not_exists(#issue)",
                    ExpressionAttributeNames={"#issue": issue},
                    ExpressionAttributeValues=values({":zero": 0, ":one": 1, ":yes": True}),
                    ReturnValues="ALL_NEW",
                )
                state = from_item(resp["Attributes"])
                return int(state[issue]), state
            except self._db.exceptions.ConditionalCheckFailedException:
                # The queue is off, or this entry's number was already issued (our own
                # attempt whose answer was lost, or another tab of this device): read which.
                state = self.state(race_id) or {}
                if issue in state:
                    return int(state[issue]), state
                if not state.get("enabled"):
                    return None
                # The other tab's entry was written and its binding dropped in between: ask again.
        raise Conflict("The queue is busy; please retry.", retry_after=1)

    def settle_arrival(self, race_id: str, device_id: str, replacing: int | None) -> None:
        """The entry now holds its number: drop the binding ``next_arrival`` made."""
        self._db.update_item(
            TableName=self._table,
            Key=state_key(race_id),
            UpdateExpression="REMOVE #issue",
            ExpressionAttributeNames={"#issue": _issue_name(device_id, replacing)},
        )

    def drain(self, race_id: str, seen_seq: int, now: float) -> bool:
        """Everyone issued has been admitted: switch the queue off, unless someone just entered."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key=state_key(race_id),
                UpdateExpression="SET enabled = :no, drainedAt = :now, #version = #version + :one",
                ConditionExpression="enabled = :yes AND seq = :seq",
                ExpressionAttributeNames={"#version": "version"},
                ExpressionAttributeValues=values(
                    {":no": False, ":yes": True, ":now": _num(now), ":one": 1, ":seq": seen_seq}
                ),
            )
            return True
        except self._db.exceptions.ConditionalCheckFailedException:
            return False

    def draw(self, race_id: str, seed_hex: str, now: float, default_rate: int) -> bool:
        """Close the pre-opening pool at its current size and fix the lottery's seed: once,
        and only while the queue is on. True if this call drew."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key=state_key(race_id),
                UpdateExpression=(
                    "SET drawSize = seq, drawSeed = :seed, drawnAt = :now, "
                    "anchorAt = :now, anchorCount = :zero, ratePerMin = if_not_exists(ratePerMin, :rate), "
                    "#version = #version + :one"
                ),
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(drawnAt) AND enabled = :yes",
                ExpressionAttributeNames={"#version": "version"},
                ExpressionAttributeValues=values(
                    {":zero": 0, ":one": 1, ":seed": seed_hex, ":now": _num(now), ":rate": default_rate, ":yes": True}
                ),
            )
            return True
        except self._db.exceptions.ConditionalCheckFailedException:
            return False  # another environment drew first (its draw stands), or no queue is on

    # -- entries ---------------------------------------------------------------------------
    def entry(self, race_id: str, device_id: str) -> dict[str, Any] | None:
        resp = self._db.get_item(TableName=self._table, Key=entry_key(race_id, device_id), ConsistentRead=True)
        return from_item(resp["Item"]) if "Item" in resp else None

    def put_entry(self, race_id: str, device_id: str, arrival: int, now: float, replace_arrival: int | None) -> bool:
        """One entry per device: False if another tab of the same device got there first."""
        item = {**from_item(entry_key(race_id, device_id)), "arrival": arrival, "enteredAt": _num(now)}
        cond = "attribute_not_exists(pk)" if replace_arrival is None else "arrival = :old"
        try:
            self._db.put_item(
                TableName=self._table,
                Item=to_item(item),
                ConditionExpression=cond,
                **(
                    {"ExpressionAttributeValues": values({":old": replace_arrival})}
                    if replace_arrival is not None
                    else {}
                ),
            )
            return True
        except self._db.exceptions.ConditionalCheckFailedException:
            return False

    def mark_admitted(self, race_id: str, device_id: str, arrival: int, now: float) -> float:
        """When this entry was first admitted (set once; later polls get the same time)."""
        try:
            resp = self._db.update_item(
                TableName=self._table,
                Key=entry_key(race_id, device_id),
                UpdateExpression="SET admittedAt = if_not_exists(admittedAt, :now)",
                ConditionExpression="arrival = :a",
                ExpressionAttributeValues=values({":now": _num(now), ":a": arrival}),
                ReturnValues="ALL_NEW",
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            return -1.0  # the entry was replaced (the device re-joined): this token is stale
        return float(from_item(resp["Attributes"])["admittedAt"])

    def spend_challenge(self, challenge_id: str, ttl_s: int) -> bool:
        """True the first time a challenge is spent, False on every reuse.

        The write carries a mark of this call, so the SDK's own retry of it (the answer lost
        to a read timeout on a loaded host, the write done) finds its own mark and is not
        taken for a reuse, which would refuse a runner's only, genuine proof."""
        mark = secrets.token_hex(8)
        try:
            self._db.put_item(
                TableName=self._table,
                Item=to_item(
                    {"pk": f"POW#{challenge_id}", "sk": "POW", "ttl": int(time.time()) + ttl_s, "spentBy": mark}
                ),
                ConditionExpression="attribute_not_exists(pk) OR spentBy = :mark",
                ExpressionAttributeValues=values({":mark": mark}),
            )
            return True
        except Exception as exc:
            if is_conditional_failure(exc):
                return False
            raise


def _issue_name(device_id: str, replacing: int | None) -> str:
    """The STATE attribute that binds a number to one entry while it is being written."""
    return f"issue:{device_id}:{replacing or 0}"


def _num(value: float) -> Decimal:
    return Decimal(str(round(value, 3)))
