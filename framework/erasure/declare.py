"""What an app declares about personal data: which cells hold a subject's value, and how to erase them.

``PersonalData(kind, table, columns, ...)`` says: the cells ``columns`` of
``table`` hold the value of a subject of ``kind`` (an e-mail address, a
person id). An erasure of ``KIND:VALUE`` finds the rows whose cells hold the
value (a cell equal to it, or, with ``separator``, a list cell holding it as
a member; both after ``normalize``) and either deletes each such row
(``erase=None``, the default) or tombstones the cells ``erase`` names and
keeps the rest of the row. With ``key_column`` the value is a column of the
table's partition key: when it is the whole partition key and there is no
``normalize``, the subject's rows are one partition read; else (a key may be
stored in any spelling, or beside other key columns) the table is scanned
(``framework.erasure.find``).

An aggregate grouped by personal data names the kind of each such group part
(``Aggregate.personal``); the app must declare where that kind's values come
from here (the kind's normalisation compares group values too), and an
erasure of the kind removes the groups holding the subject
(``framework.erasure.groups``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from framework.core.mutations import CellValue, check_identifier
from framework.core.schema import SchemaError, TableSchema

__all__ = ["PersonalData", "Subject", "parse_subject", "mentions", "check_declarations"]

_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")


@dataclass(frozen=True)
class PersonalData:
    """Cells of ``table`` holding the value of a subject of ``kind`` (see the module docstring)."""

    kind: str
    table: str
    columns: tuple[str, ...] = ()
    separator: str | None = None
    erase: tuple[str, ...] | None = None
    key_column: str | None = None
    normalize: Callable[[str], str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not _KIND.fullmatch(self.kind):
            raise ValueError(f"PersonalData.kind: {self.kind!r} is not a kind ([a-z][a-z0-9_]{{0,31}})")
        check_identifier(self.table, "table")
        object.__setattr__(self, "columns", tuple(self.columns))
        for c in self.columns:
            check_identifier(c, "column")
        if self.erase is not None:
            object.__setattr__(self, "erase", tuple(self.erase))
            if not self.erase:
                raise ValueError("PersonalData.erase: None (delete the row) or the columns to tombstone")
            for c in self.erase:
                check_identifier(c, "column")
        if self.key_column is not None:
            check_identifier(self.key_column, "column")
        elif not self.columns:
            raise ValueError(f"PersonalData({self.kind}, {self.table}): give the columns or a key_column")
        if self.separator is not None and (not isinstance(self.separator, str) or not self.separator):
            raise ValueError("PersonalData.separator: a non-empty string or None")

    def norm(self, value: str) -> str:
        """``value`` as this declaration compares it."""
        return self.normalize(value) if self.normalize is not None else value

    def members(self, cell: CellValue) -> Iterator[str]:
        """The normalised values a cell holds (its list members with ``separator``)."""
        if not isinstance(cell, str) or not cell:
            return
        parts: Iterable[str] = cell.split(self.separator) if self.separator else (cell,)
        for part in parts:
            if part:
                yield self.norm(part)

    def holds(self, cells: dict[str, CellValue], value: str) -> bool:
        """True when one of the declared columns of ``cells`` holds the (normalised) ``value``."""
        return any(value in self.members(cells.get(c)) for c in self.columns)


@dataclass(frozen=True)
class Subject:
    """A data subject: its kind and its value as given (never stored: see ``keyed``)."""

    kind: str
    value: str

    def __repr__(self) -> str:  # never print the value by accident
        return f"Subject(kind={self.kind!r}, value=<{len(self.value)} chars>)"


def parse_subject(text: str) -> Subject:
    """``KIND:VALUE`` as a Subject; ValueError when malformed (the message never holds the value)."""
    kind, sep, value = text.partition(":")
    if not sep or not _KIND.fullmatch(kind):
        raise ValueError("--subject: expected KIND:VALUE with KIND like 'email' or 'person'")
    if not value or value != value.strip():
        raise ValueError("--subject: the value is empty or has surrounding whitespace")
    return Subject(kind, value)


def check_declarations(
    declared: Sequence[PersonalData], tables: Iterable[TableSchema], aggregates: Iterable[Any] = ()
) -> None:
    """SchemaError unless every declaration names a known table and its columns, one kind has
    one normalisation, and every kind an aggregate's group parts are (``Aggregate.personal``) is
    declared."""
    by_name = {t.name: t for t in tables}
    norms: dict[str, object] = {}
    for d in declared:
        schema = by_name.get(d.table)
        if schema is None:
            raise SchemaError("personal_data", f"{d.kind}: no table {d.table!r} in the app")
        for c in (*d.columns, *(d.erase or ())):
            if c not in {x.name for x in schema.columns}:
                raise SchemaError("personal_data", f"{d.table}.{c} is not a regular column")
        if d.key_column is not None and d.key_column not in [c.name for c in schema.partition_key]:
            raise SchemaError("personal_data", f"{d.table}: key_column must be a partition key column")
        if norms.setdefault(d.kind, d.normalize) is not d.normalize:
            raise SchemaError("personal_data", f"kind {d.kind!r} is declared with two normalisations")
    for a in aggregates:
        for part, kind in a.personal.items():
            if kind not in norms:
                raise SchemaError(
                    "personal_data", f"aggregate {a.name}: group part {part!r} is of kind {kind!r},"
                    f" which no PersonalData declares (kinds: {sorted(norms)})",
                )  # fmt: skip


_BEFORE = r"(?<![\w.%+\-@])"
_AFTER = r"(?![\w%+\-@]|\.\w)"


def mentions(text: str, value: str) -> bool:
    """True when ``text`` holds ``value`` as a whole token, case-insensitively (the residue test).

    A token boundary is anything but a word character or one of ``.%+-@``
    (a trailing dot ending a sentence is a boundary), so ``al@x.io`` is
    found in ``"to: Al@X.io."`` but not in ``"bal@x.io"``.
    """
    if not value:
        return False
    pattern = re.compile(_BEFORE + re.escape(value) + _AFTER, re.IGNORECASE)
    return pattern.search(text) is not None
