"""The opening queue: device token, proof-of-work challenge, join, position, now serving."""

# No `from __future__ import annotations` here: Powertools reads the route annotations
# at run time to validate requests and responses.

from typing import Annotated

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Body

from racecap.api.runner.common import client_of
from racecap.fairness.identity import (
    NEEDS_DEVICE,
    READS_QUEUE_TOKEN,
    DeviceView,
    new_device_token,
)
from racecap.fairness.queue import ChallengeView, EnterRequest, NowServingView, QueueView
from racecap.fairness.wiring import opening_queue, signer
from racecap.http import NO_STORE
from racecap.observability import tracer

router = Router()
# The queue's shared figure: about a second at the edge (blueprint.CACHE_BEHAVIOURS), like
# the queue state's own cache (racecap.fairness.queue.STATE_TTL).
SHARED_1S = {"Cache-Control": "public, max-age=1"}
_client = client_of(router)


@router.post(
    "/api/device",
    summary="A signed device token (the site asks once, on its first visit)",
    description="Send it as `X-Racecap-Device` on later calls: the queue and the per-device hold limit key on it.",
    tags=["Fairness"],
)
@tracer.capture_method
def device_token() -> Response[DeviceView]:
    _, token = new_device_token(signer())
    return Response(201, content_types.APPLICATION_JSON, DeviceView(deviceToken=token), headers=NO_STORE)


@router.post(
    "/api/races/<raceId>/queue/challenge",
    summary="A proof-of-work challenge for joining the race's queue, or an event's waitlist",
    description="Bound to the race and the device, spent once: one solved challenge buys one queue place or one "
    "waitlist join.",
    tags=["Fairness"],
    security=NEEDS_DEVICE,
    responses={401: {"description": "DEVICE_TOKEN_REQUIRED, INVALID_TOKEN"}, 404: {"description": "RACE_NOT_FOUND"}},
)
@tracer.capture_method
def queue_challenge(raceId: str) -> Response[ChallengeView]:
    return Response(201, content_types.APPLICATION_JSON, opening_queue().challenge(raceId, _client()), headers=NO_STORE)


@router.post(
    "/api/races/<raceId>/queue",
    summary="Join the race's opening queue with a solved challenge",
    description="One place per device: joining again (a refresh, a second tab) returns the same place.",
    tags=["Fairness"],
    security=NEEDS_DEVICE,
    responses={
        401: {"description": "DEVICE_TOKEN_REQUIRED, INVALID_TOKEN"},
        403: {"description": "PROOF_OF_WORK_REFUSED (missing, wrong or reused proof), TOKEN_NOT_YOURS"},
        404: {"description": "RACE_NOT_FOUND"},
    },
)
@tracer.capture_method
def join_queue(raceId: str, body: Annotated[EnterRequest, Body()]) -> Response[QueueView]:
    view = opening_queue().enter(raceId, _client(), body)
    return _queue_response(view)


@router.get(
    "/api/races/<raceId>/queue",
    summary="Your place in the race's queue (send X-Racecap-Queue), or your admission",
    description="`Retry-After` says when to poll again: rarely while far from the front, often near it.",
    tags=["Fairness"],
    security=READS_QUEUE_TOKEN,
    responses={
        401: {"description": "DEVICE_TOKEN_REQUIRED, INVALID_TOKEN, TOKEN_EXPIRED"},
        403: {"description": "TOKEN_NOT_YOURS"},
        404: {"description": "RACE_NOT_FOUND"},
    },
)
@tracer.capture_method
def queue_place(raceId: str) -> Response[QueueView]:
    return _queue_response(opening_queue().poll(raceId, _client()))


@router.get(
    "/api/races/<raceId>/queue/now-serving",
    summary="How far admission has got: the same answer for everyone, cached for a second",
    description="A waiting runner's position is their `number` minus `nowServing`. Cached at the edge "
    "(CloudFront; nginx locally) for about a second, so polling it costs the origin nothing per runner.",
    tags=["Fairness"],
    responses={404: {"description": "RACE_NOT_FOUND"}},
)
@tracer.capture_method
def queue_now_serving(raceId: str) -> Response[NowServingView]:
    return Response(200, content_types.APPLICATION_JSON, opening_queue().now_serving(raceId), headers=SHARED_1S)


def _queue_response(view: QueueView) -> Response[QueueView]:
    headers = {**NO_STORE, **({"Retry-After": str(view.retryAfterSeconds)} if view.retryAfterSeconds else {})}
    return Response(200, content_types.APPLICATION_JSON, view, headers=headers)
