"""The HTML review report's status badges stay one word: never wrapped inside (issue 25)."""

from __future__ import annotations

import re

from solver.review.report_html import _CSS, _table
from solver.review.report_tables import Table


def _rule(selector: str) -> str:
    match = re.search(re.escape(selector) + r"\s*\{([^}]*)\}", _CSS)
    assert match, selector
    return match.group(1)


def test_status_badges_do_not_wrap():
    badge = _rule(".status")
    assert "white-space: nowrap" in badge and "overflow-wrap: normal" in badge
    assert "white-space: nowrap" in _rule("td.state")


def test_the_status_cell_carries_the_class_that_keeps_it_whole():
    html = _table(Table("Scenarios", "", ["scenario", "status"], [["base", "infeasible"]], status_column=1))
    assert '<td class="state"><span class="status infeasible">infeasible</span></td>' in html
