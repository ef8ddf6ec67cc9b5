"""A package's public face, loaded on first use: the one helper behind every `__init__.py`
that declares an `__all__`.

Why lazy: the dashboard's first frame imports a few modules of several packages, and a face
that imported every module it names would make each start pay for all of them. Each package
keeps its map of name -> module (`_WHERE`) and its `__all__`, and hands both here (PEP 562):

    __getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_face(
    package: str, where: Mapping[str, str], names: Sequence[str], namespace: Mapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` of a package's face.

    Args:
        package: the package's `__name__`.
        where: each public name -> the module of the package (relative, dotted) defining it.
        names: the package's `__all__`.
        namespace: the package's `globals()`, read when `dir()` is asked.

    Returns:
        `__getattr__`, which imports a public name's module when the name is first asked for
        (an unknown name is an AttributeError), and `__dir__`, the package's own names and
        its face's.
    """

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
