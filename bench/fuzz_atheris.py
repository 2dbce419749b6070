"""Coverage-guided fuzzing (atheris, libFuzzer) of the workload readers (issue 11).

    pip install atheris          # or: pip install -e ".[fuzz]"
    python bench/fuzz_atheris.py -runs=200000 -timeout=2 [-max_total_time=600] [CORPUS_DIR]

Each input's first byte picks the way in: JSON text, YAML text, a review (YAML), a
catalog file's text, or a serialized SolveRequest through the server's request reader.
Anything but a clear InputError (or a protobuf DecodeError for bytes that are not a
message) is a crash that libFuzzer reports with the input; -timeout=2 turns any input
that takes more than 2 s into a crash too. The seed corpus is examples/ (workloads,
catalog, review), written to a temporary folder unless a corpus folder is given.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import atheris  # noqa: E402

with atheris.instrument_imports(include=["solver", "server"]):
    from google.protobuf.message import DecodeError

    from server.generated.fleetplanner.v1 import planner_pb2 as pb
    from server.requests import read_workload
    from solver.catalog.custom import catalog_from_spec
    from solver.compile.resolve import check_references, resolve_catalog
    from solver.errors import InputError
    from solver.review.expand import parse_review
    from solver.documents.parse import parse_text
    from solver.workload.documents import parse_workload
    from solver.catalog.schema import CatalogFile

KINDS = ("json", "yaml", "review", "catalog", "proto")


def test_one_input(data: bytes) -> None:
    if not data:
        return
    kind = KINDS[data[0] % len(KINDS)]
    body = data[1:]
    try:
        if kind == "proto":
            try:
                request = pb.SolveRequest.FromString(body)
            except DecodeError:
                return
            read_workload(request.workload)
            return
        text = body.decode("utf-8", "replace")
        if kind == "review":
            parse_review(parse_text(text, ".yaml", what="review"), allow_files=False)
        elif kind == "catalog":
            spec = CatalogFile.model_validate_with_paths(parse_text(text, ".json", what="catalog"), prefix="catalog")
            catalog_from_spec(spec.gpus, spec.offers, include_default_gpus=spec.include_default_gpus)
        else:
            workload = parse_workload(parse_text(text, "." + kind))
            if workload.catalog.source != "file":  # never read files named by fuzzed input
                check_references(workload, resolve_catalog(workload))
    except InputError as exc:
        assert exc.violations and all(v.message for v in exc.violations), "an InputError without a message"


def seed_corpus() -> str:
    folder = Path(tempfile.mkdtemp(prefix="atheris-corpus-"))
    prefixes = {".json": 0, ".yaml": 1}
    for i, path in enumerate(sorted((ROOT / "examples").rglob("*.*"))):
        if path.suffix not in prefixes:
            continue
        kind = 2 if "review" in path.name else 3 if "catalogs" in path.parts else prefixes[path.suffix]
        (folder / f"seed-{i}").write_bytes(bytes([kind]) + path.read_bytes())
    return str(folder)


def main() -> int:
    argv = list(sys.argv)
    if not any(not a.startswith("-") for a in argv[1:]):
        # libFuzzer ends its process with exit(): run it in a child, then remove the temporary corpus.
        corpus = seed_corpus()
        try:
            return subprocess.run([sys.executable, *argv, corpus]).returncode
        finally:
            shutil.rmtree(corpus, ignore_errors=True)
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
