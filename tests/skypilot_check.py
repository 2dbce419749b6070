"""Validate SkyPilot YAML files with SkyPilot's own code; run as a subprocess by test_export.py.

    python tests/skypilot_check.py FILE...   ->  one JSON object per file on stdout
    python tests/skypilot_check.py --serve   ->  per line of stdin (a JSON list of files),
                                                 one JSON object per file, then a line "END"

The --serve form pays for importing SkyPilot (seconds) once for all of a test module's files.

Per file: the task schema (sky.utils.schemas.get_task_schema, SkyPilot's validator, which
also checks cloud names), then sky.Task.from_yaml_config, which builds the Resources and
the service spec (readiness probe, replicas) as `sky serve up` would before launching.
SkyPilot writes state under ~/.sky, so the caller points HOME at a temporary directory.
"""

import json
import sys

import yaml


def main(paths: list[str]) -> int:
    import sky
    from sky.utils import common_utils, schemas

    for path in paths:
        out = {"file": path, "ok": False}
        try:
            with open(path) as f:
                config = yaml.safe_load(f)
            common_utils.validate_schema(config, schemas.get_task_schema(), "Invalid task YAML: ")
            task = sky.Task.from_yaml_config(config)
            (res,) = list(task.resources)
            out.update(ok=True, num_nodes=task.num_nodes, cloud=str(res.cloud).lower() if res.cloud else None,
                       region=res.region, instance_type=res.instance_type,
                       accelerators=dict(res.accelerators or {}), image_id=res.image_id,
                       min_replicas=task.service.min_replicas if task.service else None,
                       readiness_path=task.service.readiness_path if task.service else None, run=task.run)
        except Exception as exc:  # report every file, whatever SkyPilot raises
            out["error"] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(out, default=str), flush=True)
    return 0


def serve() -> int:
    import sky  # noqa: F401  (loaded before the first request)

    print("READY", flush=True)
    for line in sys.stdin:
        main(json.loads(line))
        print("END", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(serve() if sys.argv[1:] == ["--serve"] else main(sys.argv[1:]))
