"""Reading traces (solver/sim/trace.py) and splitting them by weight."""

from __future__ import annotations

import numpy as np
import pytest

from solver.sim.trace import TraceError, read_trace, split_by_weight


def test_a_spreadsheet_csv_with_a_byte_order_mark_and_crlf_reads(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"\xef\xbb\xbf# exported\r\narrival_s,prompt_tokens,output_tokens,id\r\n0.0,100,10,a\r\n0.5,120,12,b\r\n")
    t = read_trace(path, ["chat"])
    assert t.arrival_s.tolist() == [0.0, 0.5] and t.prompt_tokens.tolist() == [100, 120]
    assert t.line.tolist() == [3, 4] and t.service == ["chat", "chat"]


def test_jsonl_takes_whole_numbers_written_as_floats_and_refuses_fractions(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"arrival_s": 0, "prompt_tokens": 100.0, "output_tokens": 7}\n\n'
                    '{"arrival_s": 1.5, "prompt_tokens": 10.5, "output_tokens": true}\n')
    with pytest.raises(TraceError) as err:
        read_trace(path, ["chat"])
    assert [p.split(": ", 1)[0] for p in err.value.problems] == [f"{path} line 3"] * 2
    path.write_text('{"arrival_s": 0, "prompt_tokens": 100.0, "output_tokens": 7}\n')
    assert read_trace(path, ["chat"]).prompt_tokens.tolist() == [100]


def test_at_most_ten_problems_are_listed(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i},-1,5\n" for i in range(30)))
    with pytest.raises(TraceError) as err:
        read_trace(path, ["chat"])
    assert len(err.value.problems) == 11 and "stopped after 10 problems" in err.value.problems[-1]


def test_split_by_weight_keeps_every_prefix_close_to_the_shares():
    w = [1.0, 3.0, 0.5]
    which = split_by_weight(w, 20_000)
    share = np.asarray(w) / sum(w)
    for n in (10, 100, 1000, 20_000):
        counts = np.bincount(which[:n], minlength=3)
        assert np.all(np.abs(counts - share * n) <= 3), (n, counts)
    assert split_by_weight([0.0, 1.0], 5).tolist() == [1] * 5
    with pytest.raises(ValueError):
        split_by_weight([0.0, 0.0], 5)
