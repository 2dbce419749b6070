"""Text from users (model, offer, region, workload names) made safe to write where it is read back.

Raw control characters break what they land in: a NUL or an ESC in a YAML comment makes
the file unparseable (YAML forbids them even in comments), a line separator (U+2028) or a
NEL (U+0085) ends a YAML comment early, and on a terminal an ESC sequence moves the cursor
or rewrites the screen. A lone surrogate (JSON allows `\\udc80`) cannot be encoded as
UTF-8 at all. Each such character is written as its Python escape (`\\x1b`, `\\u2028`,
`\\udc80`), which is plain ASCII and says what was there.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, the Unicode line and paragraph
# separators, the byte-order mark, and the surrogate halves.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff]")
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """Multi-line text (a table, a message): keeps newlines and tabs, escapes every other control."""
    return _UNSAFE.sub(_escape, text)


def escape_line(text: str) -> str:
    """One line (a YAML comment): escapes newlines and tabs as well."""
    return _UNSAFE_LINE.sub(_escape, text)
