"""Plan names -> Kubernetes / SkyPilot names: DNS-1035 labels, deterministic and collision-free.

Service names may hold upper case and `. _ : /` (the workload schema allows them), which
DNS labels do not. Lower-casing and turning the rest into dashes is lossy: `Chat_A`,
`chat.a` and `chat-a` all become `chat-a`, and one Kubernetes Service would then select
the pods of all three. So a name whose slug another name also reaches gets a short hash
of its own original text as a suffix - unless the slug *is* its text (`chat-a` stays
`chat-a`). The hash depends on the name only, so a name's label does not move between
exports of one plan, and whichever order the plan lists services in.
"""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 50  # room under the 63-character label limit for the suffixes Kubernetes controllers add
HASH_CHARS = 6  # 24 bits: a clash among a plan's few colliding names is far below one in a million
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def slug(text: str) -> str:
    """Lower case, runs of anything but [a-z0-9] as one dash, starting with a letter (DNS-1035)."""
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if s and not s[0].isalpha():
        s = "s-" + s
    return s


def digest(text: str, chars: int = HASH_CHARS) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:chars]


def shorten(name: str, limit: int = MAX_NAME) -> str:
    """At most `limit` characters; a cut name keeps a digest of the whole so names stay distinct."""
    if len(name) <= limit:
        return name
    return with_suffix(name[:limit], digest(name), limit)


def with_suffix(name: str, suffix: str, limit: int = MAX_NAME) -> str:
    return name[:limit - len(suffix) - 1].rstrip("-") + "-" + suffix


def distinct(names: dict[str, str], *, keep_exact: bool = True, reserved: frozenset[str] = frozenset(),
             fallback: str = "service") -> tuple[dict[str, str], list[list[str]]]:
    """key -> text to name it by  =>  (key -> unique label, the groups of keys whose slugs collided).

    The key is what makes an entry unique (a service name; a service's configuration); the
    label is read from the text. In a colliding group every entry gets `-HASH` of its key,
    except (keep_exact) one whose text is its slug already. A label in `reserved` (names
    taken by other objects of the same kind) is a collision too.
    """
    base = {k: shorten(slug(text) or fallback) for k, text in names.items()}
    groups: dict[str, list[str]] = {}
    for k, b in base.items():
        groups.setdefault(b, []).append(k)
    out: dict[str, str] = {}
    collided: list[list[str]] = []
    for b, keys in groups.items():
        if len(keys) > 1:
            collided.append(sorted(keys))
        for k in keys:
            plain = b not in reserved and (len(keys) == 1 or (keep_exact and names[k] == b))
            out[k] = b if plain else with_suffix(b, digest(k))
    # A hashed label could equal another entry's label: lengthen the clashing hashes until none do.
    chars = HASH_CHARS
    while clash := _clashing(out, names, keep_exact, reserved):
        chars += 4
        for k in clash:
            out[k] = with_suffix(base[k], digest(k, chars))
    return out, collided


def _clashing(out: dict[str, str], names: dict[str, str], keep_exact: bool, reserved: frozenset[str]) -> list[str]:
    counts: dict[str, int] = {}
    for label in out.values():
        counts[label] = counts.get(label, 0) + 1
    return [k for k, label in out.items()
            if label in reserved or (counts[label] > 1 and not (keep_exact and names[k] == label))]


def valid_label_value(text: str) -> bool:
    """A Kubernetes label value: at most 63 of [A-Za-z0-9-_.], alphanumeric at both ends (or empty)."""
    return len(text) <= 63 and bool(_LABEL_VALUE.match(text))
