"""Write a file atomically: a sibling temporary file, then rename over the target.

A reader (or a rerun after a crash) sees the old file or the new one, never half of one.
The temporary file is opened normally, so the result gets the usual umask permissions.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def write_atomic(path: Path, text: str) -> Path:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "w", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
