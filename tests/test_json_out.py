"""cli/json_out.write_json writes what print(json.dumps(obj, indent=2)) writes, in parts."""

from __future__ import annotations

import io
import json
import math

from cli import json_out
from cli.json_out import write_json


def _printed(obj) -> str:
    buf = io.StringIO()
    print(json.dumps(obj, indent=2), file=buf)
    return buf.getvalue()


def test_same_text_as_dumps_on_awkward_values():
    obj = {"a": [1, 2.5, -0.0, 1e300, math.inf, -math.inf, None, True, False], "é ü \u2028 \ud83d\ude00": "x\ny\t\"z\"",
           "empty": {}, "list": [], "nested": [[{"k": [0.1 + 0.2]}]]}
    buf = io.StringIO()
    write_json(obj, buf)
    assert buf.getvalue() == _printed(obj)


def test_same_text_when_the_pieces_span_many_writes(monkeypatch):
    monkeypatch.setattr(json_out, "_PIECES", 7)  # many parts, boundaries everywhere
    obj = {"periods": [{"name": f"p{i}", "fleet": [{"offer_id": "a/b", "instances": i, "usd": i / 3}]}
                       for i in range(200)]}
    writes: list[str] = []

    class Recorder(io.StringIO):
        def write(self, s):
            writes.append(s)
            return super().write(s)

    buf = Recorder()
    write_json(obj, buf)
    assert buf.getvalue() == _printed(obj)
    assert len(writes) > 100  # written in parts, not built whole
    assert max(map(len, writes)) < 200


def test_no_standard_output_writes_nothing(monkeypatch):
    monkeypatch.setattr("sys.stdout", None)  # a process started with fd 1 closed
    write_json({"status": "optimal"})  # no error, as print() would write nothing
