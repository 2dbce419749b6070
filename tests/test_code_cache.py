"""cli/code_cache.py: dataclass methods from the cache are the ones Python compiles, and a
cache file that cannot be trusted or read is ignored."""

import dataclasses
import json
import os
import stat
import subprocess
import sys

from cli.code_cache import CodeCache, _header
from conftest import EXAMPLES, ROOT


def _classes():
    """Texts the dataclasses module generates: frozen, ordered, defaults, factories, kw_only."""

    def body():
        @dataclasses.dataclass(frozen=True, order=True)
        class Point:
            x: int
            y: float = 0.5
            items: tuple = dataclasses.field(default_factory=tuple)

        @dataclasses.dataclass(kw_only=True)
        class Box:
            name: str
            size: list = dataclasses.field(default_factory=list)

        return Point, Box

    return body


def _made_with(cache: CodeCache | None):
    saved = dataclasses.__dict__.get("exec")
    try:
        if cache is not None:
            dataclasses.exec = cache.exec
        return _classes()()
    finally:
        if saved is None:
            dataclasses.__dict__.pop("exec", None)
        else:
            dataclasses.exec = saved


def _codes(cls) -> dict:
    return {name: fn.__code__ for name, fn in vars(cls).items() if callable(fn) and hasattr(fn, "__code__")}


def test_the_methods_are_the_ones_python_compiles(tmp_path):
    path = str(tmp_path / "cache.bin")
    plain = _made_with(None)
    first = CodeCache(path)
    fresh = _made_with(first)
    assert first.new > 0
    first.save()
    second = CodeCache(path)
    cached = _made_with(second)
    assert second.new == 0 and second.stored  # every text came from the file
    for a, b, c in zip(plain, fresh, cached):
        assert _codes(a).keys() == _codes(b).keys() == _codes(c).keys()
        for name, code in _codes(a).items():
            assert _codes(c)[name] == code == _codes(b)[name], name  # same bytecode, names, constants, lines
            assert _codes(c)[name].co_filename == code.co_filename  # "<string>" (dataclasses.py for a wrapper)
            assert _codes(c)[name].co_qualname == code.co_qualname and _codes(c)[name].co_flags == code.co_flags
    Point = cached[0]
    p = Point(1)
    assert p == Point(1, 0.5, ()) and p < Point(2) and hash(p) == hash(plain[0](1))
    try:
        p.x = 3
    except dataclasses.FrozenInstanceError as exc:
        assert "cannot assign to field 'x'" in str(exc)
    else:
        raise AssertionError("a frozen field was assigned")
    assert cached[1](name="b").size == []


def test_a_run_that_compiles_nothing_new_writes_nothing(tmp_path):
    path = tmp_path / "cache.bin"
    cache = CodeCache(str(path))
    _made_with(cache)
    cache.save()
    before = path.stat().st_mtime_ns
    again = CodeCache(str(path))
    _made_with(again)
    again.save()
    assert path.stat().st_mtime_ns == before


def test_untrusted_or_unreadable_files_are_ignored(tmp_path):
    path = tmp_path / "cache.bin"
    good = CodeCache(str(path))
    _made_with(good)
    good.save()
    data = path.read_bytes()
    for bad in (b"", b"garbage", b"\0" * 8 + data[8:], data[:8] + b"\xff" * 20, data[:-10]):
        path.write_bytes(bad)
        cache = CodeCache(str(path))
        assert cache.stored == {}
        Point = _made_with(cache)[0]
        assert Point(1) == Point(1) and cache.new > 0
    path.write_bytes(data)
    os.chmod(path, 0o622)  # others may write it: its code is not run
    assert CodeCache(str(path)).stored == {}
    os.chmod(path, 0o600)
    assert CodeCache(str(path)).stored
    assert data[:8] == _header()


def test_special_or_huge_files_are_ignored_without_hanging(tmp_path):
    """A FIFO at the path blocked the command in open() for ever; /dev/zero or a huge file
    would be read to the end. Only a regular file of a sane size is read."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-c", f"from cli.code_cache import CodeCache; "
                           f"print(CodeCache({str(fifo)!r}).stored)"],
                          capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == "{}", proc.stderr
    # Nor is anything but a regular file ever replaced by the cache (as root, the replace
    # once turned /dev/zero into a cache file): a FIFO and a link stay what they were.
    target = tmp_path / "target.bin"
    target.write_bytes(b"")
    link = tmp_path / "link.bin"
    link.symlink_to(target)
    for path, kind in ((fifo, stat.S_ISFIFO), (link, stat.S_ISLNK)):
        cache = CodeCache(str(path))
        _made_with(cache)
        cache.save()
        assert kind(os.lstat(path).st_mode)
    assert target.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "link.bin", "target.bin"]
    huge = tmp_path / "huge.bin"
    with open(huge, "wb") as f:
        f.write(_header())
        f.truncate(4 * 2 * 2**20 + 100)  # sparse: past the bound without the disk space
    os.chmod(huge, 0o600)
    assert CodeCache(str(huge)).stored == {}


def test_an_unwritable_place_is_only_a_slower_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = CodeCache(str(blocker / "sub" / "cache.bin"))  # a directory under a file: cannot be made
    _made_with(cache)
    cache.save()  # no exception
    assert not (tmp_path / "sub").exists()


def _without_timings(text: str) -> dict:
    d = json.loads(text)
    d.pop("solve_time_s")
    for key in ("solve_time_s", "total_time_s", "timings"):
        d["solver"].pop(key)
    return d


def test_cli_runs_give_the_same_plan_with_and_without_the_cache(tmp_path):
    cache = tmp_path / "code.bin"
    code = ("import sys; sys.argv = ['solver-cli', 'solve', sys.argv[1], '--format', 'json']; "
            "from cli.main import main; sys.exit(main())")
    outputs, written = [], []
    for setting in ("off", str(cache), str(cache)):
        env = {**os.environ, "FLEET_CODE_CACHE": setting, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run([sys.executable, "-c", code, str(EXAMPLES / "s3-big-model.json")], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outputs.append(_without_timings(proc.stdout))
        if setting == "off":
            assert not cache.exists()
        else:
            assert cache.stat().st_size > 0
            written.append(cache.stat().st_mtime_ns)
    assert outputs[0] == outputs[1] == outputs[2]
    assert written[0] == written[1]  # the second run compiled nothing new: it found every text in the file
    assert len(CodeCache(str(cache)).stored) > 100  # the planner's, pydantic's and annotated_types' dataclasses


def test_forward_references_compile_as_typing_compiles_them(tmp_path):
    import typing

    path = str(tmp_path / "cache.bin")
    texts = ["list[dict[str, Any]] | None", "Literal['a', 'b']", "(*Ts,)[0]"]
    first = CodeCache(path)
    for text in texts:
        assert first.compile(text, "<string>", "eval") == compile(text, "<string>", "eval")
    first.save()
    second = CodeCache(path)
    saved = typing.__dict__.get("compile")
    typing.compile = second.compile
    try:
        refs = [typing.ForwardRef(text) for text in texts]
        try:
            typing.ForwardRef("not an expression ::")
        except SyntaxError as exc:
            assert "Forward reference must be an expression" in str(exc)
        else:
            raise AssertionError("a bad forward reference compiled")
    finally:
        typing.__dict__.pop("compile") if saved is None else setattr(typing, "compile", saved)
    assert second.new == 0
    assert [r.__forward_code__ for r in refs] == [compile(t, "<string>", "eval") for t in texts]
    assert refs[0] == typing.ForwardRef(texts[0])
    # Anything but a plain compile of text to "<string>" goes to the builtin as it is.
    assert second.compile("x = 1", "file.py", "exec").co_filename == "file.py"
    assert second.new == 0


def test_where_the_cache_lives(monkeypatch, tmp_path):
    from cli.code_cache import default_path

    monkeypatch.setenv("FLEET_CODE_CACHE", "off")
    assert default_path() is None
    monkeypatch.setenv("FLEET_CODE_CACHE", str(tmp_path / "c.bin"))
    assert default_path() == str(tmp_path / "c.bin")
    monkeypatch.delenv("FLEET_CODE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_path().startswith(str(tmp_path / "gpu-fleet-planner") + os.sep)
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # ignored, as the XDG rules say
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_path().startswith(str(tmp_path / "home" / ".cache" / "gpu-fleet-planner") + os.sep)
    monkeypatch.setenv("HOME", "not/absolute")
    assert default_path() is None  # never a cache directory relative to wherever the command runs


def test_a_file_grown_too_large_keeps_only_what_the_run_used(tmp_path, monkeypatch):
    import cli.code_cache as cc

    path = str(tmp_path / "cache.bin")
    old = CodeCache(path)
    for k in range(50):  # texts of "older versions of the code"
        old.code(f"x_{k} = {k}")
    old.save()
    monkeypatch.setattr(cc, "MAX_FILE_BYTES", os.path.getsize(path))  # the next save would pass it
    run = CodeCache(path)
    assert len(run.stored) == 50
    run.code("x_0 = 0")  # used, from the file
    run.code("y = 1")  # new
    run.save()
    assert set(CodeCache(path).stored) == {("exec", "x_0 = 0"), ("exec", "y = 1")}
