"""A client tool's policy: the agent's entries by model-visible name, else what its annotations say."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import SCRIPTED_CONFIG
from workers.config import RunConfig

NAME = "client__files__delete"


def config(**policies: str) -> RunConfig:
    return RunConfig.of({**SCRIPTED_CONFIG, "client_tool_policies": policies})


@pytest.mark.parametrize(
    ("annotations", "policy"),
    [
        (None, "allow"),
        ({}, "allow"),
        ({"destructiveHint": True}, "require_approval"),
        ({"destructiveHint": True, "readOnlyHint": True}, "allow"),
        ({"destructiveHint": False}, "allow"),
        ({"destructiveHint": "true"}, "allow"),
        ({"readOnlyHint": True}, "allow"),
    ],
)
def test_a_destructive_tool_no_entry_names_needs_approval(annotations: dict[str, Any] | None, policy: str) -> None:
    assert config().client_policy(NAME, annotations) == policy


@pytest.mark.parametrize("entry", [NAME, "client__files__*", "*"])
def test_an_entry_that_names_the_tool_wins_over_its_annotations(entry: str) -> None:
    assert config(**{entry: "allow"}).client_policy(NAME, {"destructiveHint": True}) == "allow"
    assert config(**{entry: "deny"}).client_policy(NAME, {"destructiveHint": True}) == "deny"


def test_an_entry_for_another_tool_does_not() -> None:
    assert config(client__files__read="allow").client_policy(NAME, {"destructiveHint": True}) == "require_approval"
