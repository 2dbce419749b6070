"""Code compiled from generated text, kept between `solver-cli` runs.

Python makes each dataclass's __init__, __eq__, __hash__, __setattr__... by generating
source text and compiling it at class creation, and `typing.ForwardRef` compiles each
string annotation it is given (pydantic-core's ~700 TypedDict fields among them): a cold
one-service solve compiled ~500 method texts and ~740 annotations, about a quarter of
the process's instructions (valgrind), every run, for the same texts.

`install()` has the `dataclasses` module's exec() and the `typing` module's compile()
take the code object compiled from a text before (this run or an earlier one, kept in a
file) instead of compiling the text again. A code object is what `compile()` makes of the
text as those modules would compile it (file name "<string>", no `__future__` flags, the
interpreter's optimization level): the classes, methods and references are the same. The
file is marshal data, like a .pyc, checked against the interpreter's bytecode magic number
and optimization level; an unreadable, foreign or wrong file is ignored (and replaced).
Only the command line's own process installs it.

Location: $FLEET_CODE_CACHE if set (a file path; "0" or "off" disables it), else
$XDG_CACHE_HOME/gpu-fleet-planner/ (default ~/.cache), one file per interpreter version.
"""

# No `from __future__ import annotations`: a compile() that inherits its caller's flags,
# passed on from here, must inherit none (neither dataclasses nor typing has any).

import builtins
import marshal
import os
import stat
import sys
import types

# A file that grew past this (texts of many versions of the code) is rewritten with only
# what the writing run used: reading the file is part of every run (~3 M instructions for
# the ~0.7 MB a solve uses, ~0.3 % of it), so stale texts must not pile up.
MAX_FILE_BYTES = 2 * 2**20
_HEADER_BYTES = 8


def _header() -> bytes:
    from importlib.util import MAGIC_NUMBER

    return MAGIC_NUMBER + bytes([min(sys.flags.optimize, 255), 0, 0, 0])


def default_path() -> str | None:
    """Where the cache lives, or None when it is switched off."""
    chosen = os.environ.get("FLEET_CODE_CACHE")
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "0", "off", "false", "no") else chosen
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset, or relative (which the XDG rules say to ignore)
        base = os.path.join(os.path.expanduser("~"), ".cache")
        if not os.path.isabs(base):  # no home directory to be found: no cache
            return None
    return os.path.join(base, "gpu-fleet-planner", f"generated-code.{sys.implementation.cache_tag}.bin")


class CodeCache:
    """(mode, source text) -> code object, read from and written to one file."""

    def __init__(self, path: str):
        self.path = path
        self.stored: dict = self._read()  # (mode, text) -> marshalled code, as in the file
        self.used: dict = {}  # this run's texts (stored or new), marshalled
        self.new = 0  # texts compiled in this run

    def _read(self) -> dict:
        try:
            # Non-blocking: a FIFO (or a device) at the path must not hang the command.
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with open(fd, "rb") as f:
                st = os.fstat(f.fileno())
                # Code from this file is run: only a file of this user that nobody else can write.
                if st.st_uid != getattr(os, "getuid", lambda: st.st_uid)() or st.st_mode & 0o022:
                    return {}
                # A regular file of a sane size only (the writer keeps it under MAX_FILE_BYTES
                # plus one run's texts): never /dev/zero read to the end, nor a huge file.
                if not stat.S_ISREG(st.st_mode) or st.st_size > 4 * MAX_FILE_BYTES:
                    return {}
                data = f.read(st.st_size + 1)
            if data[:_HEADER_BYTES] != _header():
                return {}
            stored = marshal.loads(data[_HEADER_BYTES:])
        except (OSError, ValueError, EOFError, TypeError):
            return {}
        if not isinstance(stored, dict):
            return {}
        return stored

    def code(self, source: str, mode: str = "exec"):
        """The code object compile(source, "<string>", mode) makes, inheriting no flags."""
        key = (mode, source)
        blob = self.stored.get(key)
        if blob is not None:
            try:
                code = marshal.loads(blob)
            except (ValueError, EOFError, TypeError):
                code = None
            if type(code) is types.CodeType:
                self.used[key] = blob
                return code
        code = compile(source, "<string>", mode, dont_inherit=True)
        self.used[key] = marshal.dumps(code)
        self.new += 1
        return code

    def exec(self, source, globals=None, locals=None, /):
        """builtins.exec, with a text's compiled code taken from the cache."""
        if globals is None:  # exec's own default: the caller's namespaces
            caller = sys._getframe(1)
            globals, locals = caller.f_globals, caller.f_locals if locals is None else locals
        if type(source) is str:
            source = self.code(source)
        return builtins.exec(source, globals, locals)

    def compile(self, source, filename, mode, flags=0, dont_inherit=False, optimize=-1, *, _feature_version=-1):
        """builtins.compile, from the cache for plain compiles of text to "<string>"."""
        if type(source) is str and filename == "<string>" and flags == 0 and optimize == -1 \
                and _feature_version == -1 and mode in ("exec", "eval"):
            return self.code(source, mode)
        return builtins.compile(source, filename, mode, flags, dont_inherit, optimize, _feature_version=_feature_version)

    def save(self) -> None:
        """Write the file when this run compiled texts it did not hold (best effort: a
        cache that cannot be written is only a slower next run)."""
        if not self.new:
            return
        merged = {**self.stored, **self.used}
        body = marshal.dumps(merged)
        if len(body) > MAX_FILE_BYTES:
            body = marshal.dumps(self.used)
        if not _replaceable(self.path):
            return
        folder = os.path.dirname(self.path) or "."
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            # O_EXCL | O_NOFOLLOW: never through a file or link someone put at that name.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(_header() + body)
            os.replace(tmp, self.path)  # whole files only, whoever writes last
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _replaceable(path: str) -> bool:
    """Only a missing path or this user's own regular file is (re)written: the replace
    would put a file in place of a device, a FIFO or a link (FLEET_CODE_CACHE=/dev/zero,
    run as root, replaced /dev/zero)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == getattr(os, "getuid", lambda: st.st_uid)()


_installed: CodeCache | None = None


def install(path: str | None = None) -> "CodeCache | None":
    """Route the compiling of the `dataclasses` and `typing` modules through a CodeCache at
    `path` (default: default_path()), saved at exit. Once per process; None when switched off."""
    global _installed
    if _installed is not None:
        return _installed
    path = path or default_path()
    if path is None:
        return None
    import atexit
    import dataclasses
    import typing

    cache = CodeCache(path)
    # Both call the builtin by its global name (each from one place, in 3.11 to 3.13): a
    # module attribute of that name is found before the builtin.
    dataclasses.exec = cache.exec
    typing.compile = cache.compile
    atexit.register(cache.save)
    _installed = cache
    return cache
