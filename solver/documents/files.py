"""Bounded reading of a document file named by a user (workload, catalog, review).

Only regular files are read, and at most the document size limit: a path to a device
(/dev/zero), a FIFO (which would block until a writer appears), a directory, a file
the kernel refuses to read (/proc/self/mem) or a name too long for the file system
gives an InputError naming the file, never a hang, a traceback or an unbounded read.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from solver.errors import InputError
from solver.documents.limits import MAX_JSON_BYTES, MAX_YAML_BYTES, short

_CHUNK = 1024 * 1024
# O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a
# writer; it is then refused as "not a regular file". It does not affect regular files.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)


def is_yaml(path: Path) -> bool:
    return path.suffix.lower() in (".yaml", ".yml")


def read_document_file(path: Path, what: str = "workload") -> str:
    """The file's text (UTF-8, a leading byte-order mark dropped), or an InputError."""
    name = short(str(path))
    limit = MAX_YAML_BYTES if is_yaml(path) else MAX_JSON_BYTES
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise InputError.single(what, f"file not found: {name}.", "check the path") from None
    except ValueError:  # an embedded NUL character
        raise InputError.single(what, f"the file name {name!r} contains a NUL character.", "check the path") from None
    except OSError as exc:
        raise InputError.single(what, f"cannot open {name}: {_reason(exc)}.", _fix(exc)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError.single(what, f"{name} is a directory.", "pass a JSON or YAML file")
        if not stat.S_ISREG(info.st_mode):
            raise InputError.single(what, f"{name} is not a regular file ({_kind(info.st_mode)}).",
                                    "pass a JSON or YAML file; devices, pipes and sockets are not read")
        if info.st_size > limit:
            raise InputError.single(what, f"{name} is {info.st_size:,} bytes, more than the limit of {limit:,}.",
                                    "split it" + (", or convert it to JSON (up to 16 MiB)" if is_yaml(path) else ""))
        data = _read_at_most(fd, limit + 1)
    except OSError as exc:
        raise InputError.single(what, f"cannot read {name}: {_reason(exc)}.", _fix(exc)) from None
    finally:
        os.close(fd)
    if len(data) > limit:  # a file that grew, or a /proc-style file reporting size 0
        raise InputError.single(what, f"{name} is more than the limit of {limit:,} bytes.", "split it")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError.single(what, f"{name} is not UTF-8 text (invalid byte at offset {exc.start}).",
                                "save the file as UTF-8") from None


def _read_at_most(fd: int, n: int) -> bytes:
    chunks: list[bytes] = []
    left = n
    while left > 0:
        chunk = os.read(fd, min(_CHUNK, left))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _reason(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


def _fix(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return "use a shorter path"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "check the file's permissions"
    return "pass a readable JSON or YAML file"


def _kind(mode: int) -> str:
    for test, word in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO/pipe"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a plain file"
