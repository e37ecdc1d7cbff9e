"""User functions from the program's own modules travel by value (no import needed remotely)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

from flintlock.graph.user_code import dumps_user_function, is_program_module


def test_function_from_a_program_module_loads_where_the_module_is_missing(tmp_path: Path) -> None:
    pkg = tmp_path / "myjob_helpers_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "words.py").write_text(
        "import re\n_WORD = re.compile(r'[a-z]+')\n"
        "def normalise(w):\n    return w.upper()\n"
        "def split_line(row):\n    return [(normalise(w),) for w in _WORD.findall(row.lower())]\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        words = importlib.import_module("myjob_helpers_pkg.words")
        assert is_program_module(words)
        payload = dumps_user_function(words.split_line)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("myjob_helpers_pkg.words", None)
        sys.modules.pop("myjob_helpers_pkg", None)
    blob = tmp_path / "fn.pickle"
    blob.write_bytes(payload)
    # a fresh interpreter whose sys.path does not contain tmp_path
    code = (
        "import cloudpickle, sys; fn = cloudpickle.loads(open(sys.argv[1], 'rb').read()); "
        "print(fn('Hello, brave new World'))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(blob)], capture_output=True, text=True,
                         cwd="/", check=True)
    assert out.stdout.strip() == "[('HELLO',), ('BRAVE',), ('NEW',), ('WORLD',)]"


def test_a_callable_object_ships_the_modules_its_class_and_attributes_use(tmp_path: Path) -> None:
    """A generator function given as an object (``__call__``) whose class and attribute come from
    two program modules: both travel by value, not only the object's own module."""
    pkg = tmp_path / "myjob_objects_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "table.py").write_text(
        "class Lookup:\n    def __init__(self):\n        self.names = ['a', 'b']\n"
        "    def name(self, i):\n        return self.names[i % 2]\n")
    (pkg / "gen.py").write_text(
        "from myjob_objects_pkg import table\n"
        "def scale(i):\n    return i * 10\n"
        "class Gen:\n    def __init__(self):\n        self.lookup = table.Lookup()\n"
        "    def __call__(self, i):\n        return (scale(i), self.lookup.name(i))\n")
    sys.path.insert(0, str(tmp_path))
    try:
        gen = importlib.import_module("myjob_objects_pkg.gen")
        payload = dumps_user_function(gen.Gen())
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("myjob_objects_pkg.gen", "myjob_objects_pkg.table", "myjob_objects_pkg"):
            sys.modules.pop(name, None)
    blob = tmp_path / "obj.pickle"
    blob.write_bytes(payload)
    code = ("import cloudpickle, sys; fn = cloudpickle.loads(open(sys.argv[1], 'rb').read()); "
            "print(fn(3))")
    out = subprocess.run([sys.executable, "-c", code, str(blob)], capture_output=True, text=True,
                         cwd="/")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "(30, 'b')"


def test_libraries_are_not_shipped_by_value() -> None:
    import json

    import cloudpickle

    import flintlock.graph.chaining as chaining

    assert not is_program_module(json)
    assert not is_program_module(cloudpickle)
    assert not is_program_module(chaining)
