"""The optional extras of the ``converge`` distribution, and the one-line error when one is missing.

A bare ``pip install converge`` runs stream workers; each extra adds the packages of one
feature (``pip install 'converge[spark]'``), imported only where the feature runs. The
library's own imports of them (the delivery chart, the embedded stack, the test kit's
Hypothesis helpers) sit inside ``needs_extra``, so a missing package is a ``MissingExtra``
naming the extra to install; the ``converge`` command prints any other missing package of an
extra (``converge spark`` without pyspark, a ``zookeeper://`` URL without kazoo) the same way
(``missing_extra``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from framework.core.errors import ConvergeError

__all__ = ["EXTRAS", "MissingExtra", "missing_extra", "needs_extra"]

#: Each extra and the top-level modules of the packages it installs (pyproject.toml's
#: ``[project.optional-dependencies]``).
EXTRAS: Mapping[str, tuple[str, ...]] = {
    "spark": ("pyspark", "pandas", "pyarrow"),
    "testing": ("hypothesis",),
    "zookeeper": ("kazoo",),
    "report": ("matplotlib",),
    "stack": ("noida_db", "moto"),
    "s3": ("boto3", "botocore"),
    "decoders": ("fastavro", "jsonschema"),  # and protobuf (module ``google.protobuf``)
}
_EXTRA_OF = {module: extra for extra, modules in EXTRAS.items() for module in modules}


class MissingExtra(ConvergeError, ImportError):
    """A package of an extra is not installed; the message says what to install, on one line."""


def missing_extra(exc: BaseException, what: str = "") -> MissingExtra | None:
    """The ``MissingExtra`` that ``exc`` means when it is a missing package of an extra, else None;
    ``what`` (e.g. ``converge spark``) starts the message."""
    if isinstance(exc, MissingExtra):
        return exc
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    module = exc.name.partition(".")[0]
    extra = _EXTRA_OF.get(module)
    if extra is None:
        return None
    lacks = f"{what} needs the {extra!r} extra" if what else f"the {extra!r} extra is not installed"
    return MissingExtra(f"{lacks} (no module named {module!r}): pip install 'converge[{extra}]'", name=module)


@contextmanager
def needs_extra(what: str) -> Iterator[None]:
    """Raise ``MissingExtra`` for a package of an extra that an import inside the block misses."""
    try:
        yield
    except ModuleNotFoundError as exc:
        error = missing_extra(exc, what)
        if error is None:
            raise
        raise error from exc
