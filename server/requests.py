"""Reading a request: the workload document, and the solver's time budget from the deadline."""

from __future__ import annotations

from dataclasses import replace
from pathlib import PurePath

from google.protobuf.message import DecodeError

from server import convert
from server.generated.fleetplanner.v1 import planner_pb2 as pb
from solver.catalog.custom import catalog_from_spec
from solver.catalog.owned import with_owned
from solver.catalog.types import Catalog
from solver.backend_choices import withdrawn_backend
from solver.errors import InputError
from solver.compile.resolve import check_references, resolve_catalog
from solver.catalog.schema import CatalogFile
from solver.workload.schema import Workload
from solver.documents.limits import short
from solver.documents.parse import check_document, parse_text
from solver.workload.documents import parse_workload

BACKENDS = {pb.BACKEND_AUTO: "auto", pb.BACKEND_SCIP: "scip", pb.BACKEND_HIGHS: "highs", pb.BACKEND_CP_SAT: "cp-sat"}


def read_workload(msg: pb.Workload, field: str = "workload",
                  current_fleet: pb.CurrentFleet | None = None) -> tuple[Workload, Catalog]:
    """The request's workload, validated, and the catalog it plans over; every problem is
    an InputError with a field path. A request's current fleet replaces the workload's."""
    kind = msg.WhichOneof("document")
    if kind is None:
        raise InputError.single(field, "no workload given.",
                                "set workload.object (a JSON object), workload.json or workload.yaml")
    if kind == "object":
        # The same checks as JSON/YAML text (solver/documents/limits.py): NaN and infinities
        # (a Struct's numbers are doubles), strings, number ranges, depth, size.
        data = check_document(convert.struct_to_dict(msg.object), field)
    else:
        data = parse_text(getattr(msg, kind), suffix=".yaml" if kind == "yaml" else ".json")
    if current_fleet is not None:
        data = dict(data, current_fleet=convert.current_fleet_from_proto(current_fleet))
    workload = parse_workload(data)
    if workload.catalog.source != "file":
        catalog = resolve_catalog(workload)
    elif msg.HasField("catalog_file"):
        catalog = catalog_from_document(msg.catalog_file)
    else:
        # Reading a path named in a request would let any caller read the server's files.
        raise InputError.single("catalog.file", f"the workload names the catalog file {workload.catalog.file!r}, but "
                                "the service does not read files named in requests.",
                                "send the file's content in workload.catalog_file (the Python client does when "
                                "given base_dir or a workload path), or inline its offers under catalog.offers")
    catalog = with_owned(workload, catalog)  # a catalog file's offers meet the owned GPUs here too
    return check_references(workload, catalog), catalog


def catalog_from_document(doc: pb.CatalogDocument) -> Catalog:
    """A catalog file sent along with the request: the same checks and the same description
    (its path) as solver.catalog.load_catalog_file gives the local CLI."""
    suffix = PurePath(doc.path).suffix.lower()
    try:
        data = parse_text(doc.text, suffix=suffix if suffix in (".yaml", ".yml") else ".json", what="catalog")
        spec = CatalogFile.model_validate_with_paths(data, prefix="catalog")
        return catalog_from_spec(spec.gpus, spec.offers, include_default_gpus=spec.include_default_gpus,
                                 description=doc.path)
    except InputError as exc:
        raise InputError([replace(v, field=f"catalog.file ({short(doc.path)}): {v.field}") for v in exc.violations]) from None


def decode(cls, data: bytes, field: str = "request"):
    """A request message from its bytes; garbage or invalid UTF-8 is INVALID_ARGUMENT."""
    try:
        return cls.FromString(data)
    except (DecodeError, RecursionError, ValueError) as exc:
        raise InputError.single(field, f"the request is not a valid {cls.DESCRIPTOR.full_name} message "
                                       f"(protobuf decoding failed: {exc}).",
                                "send the serialized message that proto/fleetplanner/v1/planner.proto defines; "
                                "every string must be valid UTF-8") from None


def backend_name(value: int) -> str | None:
    """The request's backend, or None for the workload's own choice."""
    if value == pb.BACKEND_UNSPECIFIED:
        return None
    if value not in BACKENDS:
        raise InputError.single("backend", f"unknown backend enum value {value}.", "use AUTO, SCIP or HIGHS")
    withdrawn = withdrawn_backend(BACKENDS[value])
    if withdrawn:  # BACKEND_CP_SAT stays in the proto for old clients, and is refused saying why
        raise InputError.single("backend", *withdrawn)
    return BACKENDS[value]


# Seconds per service kept for the work after the solver's limit: evaluation, the plan's
# values, PlanResult.to_dict(), proto conversion and serialization. Measured for 1,000
# generated services on the 2-core machine with another benchmark running: 1.6 s from the
# limit to the plan, 0.52 s to_dict, 0.12 s proto (2.2 ms per service); twice that here.
ANSWER_S_PER_SERVICE = 0.0045


def answer_margin_s(remaining_s: float, services: int = 1) -> float:
    """Time kept back from the deadline to evaluate the plan and send the answer: 15 %
    of what is left, between 0.3 s and 3 s, and at least ANSWER_S_PER_SERVICE per service
    (a 1,000-service plan used to be killed while serialising at a 25 s deadline), never
    more than half of what is left. Measured for a 150-service plan: evaluation 0.04 s,
    PlanResult.to_dict() 0.18 s, proto conversion and serialization 0.04 s; a one-service
    plan takes milliseconds."""
    base = min(max(0.15 * remaining_s, 0.3), 3.0)
    return max(base, min(ANSWER_S_PER_SERVICE * services, 0.5 * remaining_s))


def answer_send_s(services: int) -> float:
    """Of the margin, what converting and sending the answer takes after the plan is made
    (to_dict and proto: 0.64 of the 2.2 ms per service measured, about 0.3): the point past
    which the plan's informational values are left out is that far before the deadline."""
    return max(0.1, 0.3 * ANSWER_S_PER_SERVICE * services)


def solve_budget(requested_s: float, remaining_s: float | None, services: int = 1) -> tuple[float, bool]:
    """(the solver's time limit, whether the call's deadline rather than the request set it)."""
    if remaining_s is None:
        return requested_s, False
    budget = remaining_s - answer_margin_s(remaining_s, services)
    if budget < requested_s:
        return max(budget, 0.0), True
    return requested_s, False
