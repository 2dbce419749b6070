"""The JSON Schemas `solver-cli schema` and `solver-cli schema --catalog` print describe
every property, and show every default (default_factory ones included, which pydantic
leaves out unless the field writes them in)."""

from __future__ import annotations

import json
import subprocess

import pytest

from solver.catalog import schema as catalog_module
from solver.review import spec as review_module
from solver.review.spec import ReviewFile
from solver.workload import schema as schema_module
from solver.catalog.schema import CatalogFile
from solver.workload.schema import Workload

ROOTS = {"workload": Workload, "catalog": CatalogFile, "review": ReviewFile}


def _properties(node, path: str):
    """(path, property schema) for every property of every object schema under node,
    $defs included."""
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            yield f"{path}.{name}", prop
        for key, value in node.items():
            if key == "properties":
                for name, prop in value.items():
                    yield from _properties(prop, f"{path}.{name}")
            elif key == "$defs":
                for name, sub in value.items():
                    yield from _properties(sub, f"$defs.{name}")
            else:
                yield from _properties(value, f"{path}" if key in ("anyOf", "allOf", "oneOf") else f"{path}.{key}")
    elif isinstance(node, list):
        for item in node:
            yield from _properties(item, path)


def _schema(root: type) -> dict:
    return root.model_json_schema()


@pytest.mark.parametrize("which", sorted(ROOTS))
def test_every_property_has_a_description(which):
    schema = _schema(ROOTS[which])
    props = list(_properties(schema, ROOTS[which].__name__))
    assert len(props) > 10
    missing = sorted({path for path, prop in props
                      if not isinstance(prop.get("description"), str) or not prop["description"].strip()})
    assert not missing, f"{len(missing)} {which} schema properties have no description: {', '.join(missing)}"


def test_the_cli_prints_the_described_schemas(solver_cli):
    for which, args in (("workload", ["schema"]), ("catalog", ["schema", "--catalog"]),
                        ("review", ["schema", "--review"])):
        proc = subprocess.run([solver_cli, *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        printed = json.loads(proc.stdout)
        assert printed == json.loads(json.dumps(_schema(ROOTS[which]))), which
        missing = [path for path, prop in _properties(printed, which) if not prop.get("description")]
        assert not missing, f"{which}: {missing}"


def _defs(schema: dict, root: type) -> dict[str, dict]:
    return {root.__name__: schema, **schema.get("$defs", {})}


@pytest.mark.parametrize("which", sorted(ROOTS))
def test_every_optional_field_shows_its_default(which):
    """Every field with a default has it in the schema, equal to the value validation gives."""
    root = ROOTS[which]
    problems = []
    for name, model_schema in _defs(_schema(root), root).items():
        cls = next(getattr(m, name) for m in (schema_module, catalog_module, review_module) if hasattr(m, name))
        for field_name, field in cls.model_fields.items():
            prop = model_schema["properties"][field.alias or field_name]
            if field.is_required():
                assert "default" not in prop, f"{name}.{field_name}"
                continue
            if "default" not in prop:
                problems.append(f"{name}.{field_name}: no default")
                continue
            actual = field.get_default(call_default_factory=True)
            shown = prop["default"]
            if hasattr(actual, "model_dump"):  # a nested object: {} stands for all its own defaults
                same = type(actual).model_validate(shown) == actual
            else:
                same = shown == actual
            if not same:
                problems.append(f"{name}.{field_name}: schema default {shown!r}, actual {actual!r}")
    assert not problems, "\n".join(problems)


def test_known_defaults_appear():
    w = _schema(Workload)
    defs = w["$defs"]
    assert defs["SolverOptions"]["properties"]["time_limit_s"]["default"] == 60.0
    assert defs["Constraints"]["properties"]["headroom"]["default"] == 0.0
    assert defs["Demand"]["properties"]["arrival_cv"]["default"] == 1.0
    assert defs["Service"]["properties"]["precisions"]["default"] == ["fp16"]
    assert defs["Service"]["properties"]["engine"]["default"] == "vllm"
    assert defs["Constraints"]["properties"]["pricing"]["default"] == "on_demand"
    assert w["properties"]["name"]["default"] == "workload"
    assert w["properties"]["solver"]["default"] == {}
    c = _schema(CatalogFile)
    assert c["properties"]["include_default_gpus"]["default"] is True
    assert c["$defs"]["OfferSpec"]["properties"]["region"]["default"] == "any"
    assert c["$defs"]["OfferSpec"]["properties"]["source"]["default"] == "user"


def test_descriptions_keep_the_validation_bounds():
    """Describing the fields changed no bound: spot checks of the contract."""
    defs = _schema(Workload)["$defs"]
    assert defs["SolverOptions"]["properties"]["time_limit_s"]["exclusiveMinimum"] == 0
    assert defs["SolverOptions"]["properties"]["time_limit_s"]["maximum"] == 86_400
    assert defs["Constraints"]["properties"]["headroom"]["maximum"] == 10
    assert defs["Demand"]["properties"]["arrival_cv"]["maximum"] == 20
    assert defs["Service"]["properties"]["precisions"]["minItems"] == 1
    assert defs["InlineModel"]["properties"]["experts"]["minimum"] == 1
