"""The Review RPC's pieces: the review document from a request, and results as messages.

The service reads no files, so a review arrives as text and is parsed with
allow_files=False: a base workload or catalog given as a path is INVALID_ARGUMENT.
"""

from __future__ import annotations

import json
from collections import Counter

from server import convert
from server.generated.fleetplanner.v1 import planner_pb2 as pb
from solver.errors import InputError
from solver.review import Review, ScenarioResult, parse_review
from solver.review.result import STATUSES
from solver.documents.parse import parse_text

MAX_TIME_LIMIT_S = 86_400.0  # the same bound a solve's time limit has


def read_review(request: pb.ReviewRequest) -> tuple[Review, float | None]:
    """The request's review, expanded into scenarios, and its per-scenario time limit
    override (None: the review's own); every problem is an InputError with a field path."""
    kind = request.WhichOneof("document")
    if kind is None:
        raise InputError.single("review", "no review given.", "set json or yaml to the review file's content")
    data = parse_text(getattr(request, kind), suffix=".yaml" if kind == "yaml" else ".json", what="review")
    review = parse_review(data, base_dir=".", allow_files=False)
    limit_s = None
    if request.HasField("time_limit_per_scenario_s"):
        limit_s = request.time_limit_per_scenario_s
        if not 0 < limit_s <= MAX_TIME_LIMIT_S:
            raise InputError.single("time_limit_per_scenario_s",
                                    f"must be between 0 and {MAX_TIME_LIMIT_S:g} s, got {limit_s:g}.",
                                    "give the seconds each scenario's solve may take, or leave it unset")
    return review, limit_s


def outcome_to_proto(result: ScenarioResult) -> pb.ScenarioOutcome:
    """A ScenarioResult -> its typed key fields plus the whole result as JSON text."""
    return pb.ScenarioOutcome(
        id=result.id, name=result.name, group=result.group, status=result.status,
        usd_per_hour=result.usd_per_hour, gpus=result.gpus, optimality_gap=result.optimality_gap,
        solve_time_s=result.solve_time_s, error=result.error,
        reasons=[convert.to_message(pb.InfeasibilityReason, r, "reason") for r in result.reasons],
        result_json=json.dumps(result.to_dict()))


def summary_to_proto(review: Review, counts: Counter) -> pb.ReviewSummary:
    return pb.ReviewSummary(review=review.name, scenarios=sum(counts.values()),
                            statuses=[pb.StatusCount(status=s, count=counts[s]) for s in STATUSES if counts[s]])
