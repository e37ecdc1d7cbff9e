"""Serializing user functions so they run where the program's own files are not.

cloudpickle pickles a function defined in an importable module *by reference* (module + name).
Spark's Python workers and remote TaskManagers can import installed libraries, but not the
program's own modules (``examples/word_count.py``, ``my_job/helpers.py``). So a function, and every
function or class it refers to, whose module is the program's own code (not installed in
site-packages or the standard library, and not flintlock or pyspark) is pickled *by value*
(``cloudpickle.register_pickle_by_value`` for the duration of the dump).
"""

from __future__ import annotations

import collections
import functools
import sys
import sysconfig
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cloudpickle

__all__ = ["dumps_user_function", "is_program_module"]

_INSTALLED_ROOTS = tuple(
    str(Path(p).resolve())
    for key in ("stdlib", "platstdlib", "purelib", "platlib")
    if (p := sysconfig.get_paths().get(key))
)
_LIBRARY_PACKAGES = ("flintlock", "pyspark", "pyarrow", "pandas", "numpy", "cloudpickle")


def is_program_module(module: types.ModuleType) -> bool:
    """True when ``module`` is the user's own code (to be shipped by value)."""
    name = module.__name__
    if name == "__main__" or name.split(".")[0] in _LIBRARY_PACKAGES:
        return False
    file = getattr(module, "__file__", None)
    if not file:
        return False
    path = str(Path(file).resolve())
    return not path.startswith(_INSTALLED_ROOTS)


def _referenced_modules(obj: Any, seen: set[int], depth: int = 0) -> Iterator[types.ModuleType]:
    """Modules of ``obj`` and of the functions/classes it references (globals, closure)."""
    if id(obj) in seen or depth > 20:
        return
    seen.add(id(obj))
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    if module is not None:
        yield module
    code_globals: dict[str, Any] = {}
    if isinstance(obj, types.FunctionType):
        names = set(obj.__code__.co_names)
        for const in obj.__code__.co_consts:
            if isinstance(const, types.CodeType):
                names.update(const.co_names)
        code_globals = {n: obj.__globals__[n] for n in names if n in obj.__globals__}
        for cell in obj.__closure__ or ():
            try:
                code_globals[f"<cell{id(cell)}>"] = cell.cell_contents
            except ValueError:
                pass
    elif isinstance(obj, functools.partial):
        code_globals = {"func": obj.func, **{f"<arg{i}>": a for i, a in enumerate(obj.args)},
                        **obj.keywords}
    elif isinstance(obj, type):  # a class: its methods (and what they use)
        for name, member in vars(obj).items():
            member = getattr(member, "__func__", member)  # staticmethod, classmethod
            member = getattr(member, "fget", member)  # property
            if isinstance(member, types.FunctionType):
                code_globals[name] = member
    elif hasattr(obj, "__dict__") and not isinstance(obj, types.ModuleType):
        # an object, e.g. a callable instance: its class and its attributes
        code_globals = {"<class>": type(obj), **{f"<attr {k}>": v for k, v in vars(obj).items()}}
    for value in code_globals.values():
        if isinstance(value, types.ModuleType):
            yield value
        elif (isinstance(value, (types.FunctionType, type)) or callable(value)
              or (hasattr(value, "__dict__") and not isinstance(value, types.ModuleType))):
            yield from _referenced_modules(value, seen, depth + 1)


#: modules this process registered for pickling by value, with how many dumps use them (dumps
#: nest: an object's ``__reduce__`` may call ``dumps_user_function`` for what it wraps)
_by_value_users: collections.Counter[str] = collections.Counter()
_by_value_lock = threading.Lock()


@contextmanager
def _by_value(modules: set[types.ModuleType]) -> Iterator[None]:
    mine = []
    with _by_value_lock:
        for m in modules:
            if _by_value_users[m.__name__] == 0:
                try:
                    cloudpickle.register_pickle_by_value(m)
                except ValueError:  # not importable by its name: cloudpickle ships it anyway
                    continue
            _by_value_users[m.__name__] += 1
            mine.append(m)
    try:
        yield
    finally:
        with _by_value_lock:
            for m in mine:
                _by_value_users[m.__name__] -= 1
                if _by_value_users[m.__name__] == 0:
                    del _by_value_users[m.__name__]
                    cloudpickle.unregister_pickle_by_value(m)


def dumps_user_function(fn: Any) -> bytes:
    """cloudpickle ``fn``, shipping the program's own modules it uses by value."""
    modules = {m for m in _referenced_modules(fn, set()) if is_program_module(m)}
    with _by_value(modules):
        return cloudpickle.dumps(fn)
