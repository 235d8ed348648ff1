"""Units: declaring personal group parts (``Aggregate.personal``) and the contributions' group screen."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import pytest

from framework import App, PersonalData
from framework.core.aggregate import Group
from framework.core.schema import SchemaError
from framework.erasure.groups import withheld_groups
from framework.erasure.keyed import subject_hash
from tests.erasure.visits_app import VisitAgent, VisitsDaily


def test_a_personal_part_must_be_a_group_part_and_its_kind_a_kind() -> None:
    with pytest.raises(SchemaError, match="not in group_by"):

        class Wrong(VisitsDaily):
            personal: ClassVar[Mapping[str, str]] = {"site": "email"}

    with pytest.raises(SchemaError, match="not a subject kind"):

        class Bad(VisitsDaily):
            personal: ClassVar[Mapping[str, str]] = {"owner": "E-mail"}


def test_the_app_refuses_a_personal_kind_no_declaration_names() -> None:
    with pytest.raises(SchemaError, match="no PersonalData declares"):
        App("v", agents=[VisitAgent()], aggregates=[VisitsDaily()],
            personal_data=[PersonalData("phone", "visit", columns=("site",))])  # fmt: skip


class _Screen:
    def __init__(self, key: bytes, hashes: set[str]) -> None:
        self.key, self.hashes = key, hashes


def test_the_group_screen_withholds_erased_subjects_groups_in_any_spelling() -> None:
    personal = [PersonalData("email", "visit", columns=("owner",), normalize=str.lower)]
    app = App("v", agents=[VisitAgent()], aggregates=[VisitsDaily()], personal_data=personal)
    key = b"k" * 16
    screen = withheld_groups(app, _Screen(key, {subject_hash(key, "email", "ann@x.io")}))
    assert screen is not None
    agg = app.aggregates[0]
    assert screen(agg, Group(("Ann@X.io",), 0)) and not screen(agg, Group(("bo@x.io",), 0))
    assert screen(agg, Group((None,), 0)) is False
    assert withheld_groups(app, _Screen(key, set())) is None
