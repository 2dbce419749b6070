"""GPU names as people write them: "NVIDIA H100 80GB HBM3" (what nvidia-smi prints), "h100",
"L40s", "NVIDIA L4" - resolved to the catalog's names (H100-SXM, L40S, L4) deterministically.

A name is split into words (spaces, dashes, underscores; case ignored); vendor words
(NVIDIA, AMD, Tesla, GeForce, Instinct, Radeon) are dropped; a memory size (80GB), a form
(SXM, SXM5, PCIe, NVL) and a memory type (HBM3, HBM2e, ...) narrow the catalog's GPUs of the
same base model (H100). One GPU left: the name resolves to it. Several: the catalog's
unqualified name where there is exactly one (A100-80GB beside A100-80GB-PCIe: the SXM board),
else an error listing them (H100-SXM, H100-PCIe and H100-NVL are all qualified: no default is
guessed, an SXM board and a PCIe card plan very differently).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Words that name the vendor or the product line, not the GPU ("NVIDIA RTX 6000 Ada Generation").
_VENDOR_WORDS = {"NVIDIA", "AMD", "TESLA", "GEFORCE", "INSTINCT", "RADEON", "GENERATION"}
_FORM_WORDS = {"SXM": "SXM", "SXM2": "SXM", "SXM4": "SXM", "SXM5": "SXM", "SXM6": "SXM", "PCIE": "PCIe",
               "NVL": "NVL"}
_MEMORY_TYPES = {"HBM2", "HBM2E", "HBM3", "HBM3E", "GDDR6", "GDDR6X", "GDDR7"}
# Where the memory type tells boards of one model apart (NVIDIA's datasheets): the H100 SXM
# and NVL carry HBM3, the H100 PCIe card HBM2e. nvidia-smi names the SXM board
# "NVIDIA H100 80GB HBM3" and the PCIe card "NVIDIA H100 PCIe".
_FORMS_BY_MEMORY_TYPE = {("H100", "HBM3"): {"SXM", "NVL"}, ("H100", "HBM2E"): {"PCIe"}}
_SIZE = re.compile(r"^(\d+)(GB|GIB)$")


@dataclass(frozen=True)
class _Words:
    base: str  # e.g. "H100", "RTX-6000-ADA"
    memory_gb: int | None
    form: str | None  # "SXM" | "PCIe" | "NVL"
    memory_type: str | None


def _words(name: str) -> _Words:
    base, memory_gb, form, memory_type = [], None, None, None
    for word in re.split(r"[\s_\-]+", name.strip().upper()):
        size = _SIZE.match(word)
        if not word or word in _VENDOR_WORDS:
            continue
        if size:
            memory_gb = int(size.group(1))
        elif word in _FORM_WORDS:
            form = _FORM_WORDS[word]
        elif word in _MEMORY_TYPES:
            memory_type = word
        else:
            base.append(word)
    return _Words("-".join(base), memory_gb, form, memory_type)


@dataclass(frozen=True)
class GpuName:
    """What a written name resolves to: `name` (a catalog GPU), or the `candidates` it could be."""

    name: str | None
    candidates: tuple[str, ...] = ()


def resolve_gpu_name(written: str, gpus: dict) -> GpuName:
    """`gpus`: the catalog's GPU types by name (objects with memory_gib and form_factor)."""
    if written in gpus:
        return GpuName(written)
    lowered = {n.lower(): n for n in gpus}
    if written.lower() in lowered:
        return GpuName(lowered[written.lower()])
    want = _words(written)
    if not want.base:
        return GpuName(None)
    matches = []
    for name in sorted(gpus):
        have = _words(name)
        if have.base != want.base:
            continue
        gpu = gpus[name]
        form = have.form or getattr(gpu, "form_factor", None)
        if want.memory_gb is not None and abs(gpu.memory_gib - want.memory_gb) > 0.1 * want.memory_gb:
            continue
        if want.form == "NVL" and have.form != "NVL" or want.form in ("SXM", "PCIe") and (
                have.form == "NVL" or form != want.form):
            continue
        allowed = _FORMS_BY_MEMORY_TYPE.get((want.base, want.memory_type or ""))
        if allowed is not None and (have.form if have.form == "NVL" else form) not in allowed:
            continue
        matches.append(name)
    if len(matches) > 1 and want.form is None and want.memory_type is None:
        # The catalog's unqualified name is its default board: "A100 80GB" is A100-80GB (SXM),
        # not A100-80GB-PCIe. Where every name is qualified (H100-SXM, H100-PCIe) none is.
        plain = [m for m in matches if _words(m).form is None]
        matches = plain if len(plain) == 1 else matches
    if len(matches) == 1:
        return GpuName(matches[0])
    return GpuName(None, tuple(matches))


def ambiguity(written: str, candidates: tuple[str, ...]) -> str:
    """The message for a name that fits several GPU types."""
    forms = " (an SXM board and a PCIe card differ in memory bandwidth and links: say which)" \
        if any("SXM" in c for c in candidates) and any("PCIe" in c for c in candidates) else ""
    return f"GPU type {written!r} is ambiguous: it could be {' or '.join(map(repr, candidates))}{forms}"
