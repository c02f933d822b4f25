"""Reading a version's policies in both forms (a name, or an object with approval_timeout_s) into the
rule a call gets, and the approval deadline a step hands its commit."""

from __future__ import annotations

from typing import Any

import pytest

from broker.services.runs import PlannedCall, Route, StepCall
from common.policies import Rule, client_rule, match_policy, match_rule, rule_of
from workers.config import McpGrant, RunConfig

TIMED = {"policy": "require_approval", "approval_timeout_s": 60}


@pytest.mark.parametrize(
    ("entry", "rule"),
    [
        ("allow", Rule("allow")),
        ("deny", Rule("deny")),
        ("require_approval", Rule("require_approval")),
        (TIMED, Rule("require_approval", 60)),
        ({"policy": "allow"}, Rule("allow")),
        # Read safely whatever was stored: an unknown entry asks a person.
        ("maybe", Rule("require_approval")),
        ({"policy": "maybe"}, Rule("require_approval")),
        (5, Rule("require_approval")),
        # A deadline only ever comes with require_approval.
        ({"policy": "allow", "approval_timeout_s": 5}, Rule("allow")),
    ],
)
def test_an_entry_in_either_form_reads_as_its_rule(entry: Any, rule: Rule) -> None:
    assert rule_of(entry) == rule


def test_patterns_match_the_object_form_as_the_name_form() -> None:
    policies: dict[str, Any] = {"client__web__*": TIMED, "client__web__read": "allow", "*": "deny"}
    assert match_rule(policies, "client__web__erase") == Rule("require_approval", 60)
    assert match_rule(policies, "client__web__read") == Rule("allow")
    assert match_policy(policies, "server_thing") == "deny"
    assert client_rule({}, "client__x__y", {"destructiveHint": True}) == Rule("require_approval")


def test_a_grant_reads_its_default_and_its_tool_entries() -> None:
    grant = McpGrant.of(
        {
            "name": "kit",
            "url": "https://mcp.example.com/mcp",
            "default_policy": TIMED,
            "tools": [{"name": "add", "policy": "allow"}, {"name": "wipe", **TIMED, "approval_timeout_s": 5}],
        },
        {},
    )
    assert grant.rule("other") == Rule("require_approval", 60)
    assert grant.policy("other") == "require_approval"
    assert grant.rule("add") == Rule("allow")
    assert grant.rule("wipe") == Rule("require_approval", 5)
    plain = McpGrant.of({"name": "kit", "url": "https://mcp.example.com/mcp", "default_policy": "deny"}, {})
    assert plain.rule("x") == Rule("deny")


def test_a_run_config_gives_each_kind_of_tool_its_rule() -> None:
    config = RunConfig.of(
        {
            "model": {"format": "openai_responses", "model": "m", "max_tokens": 1},
            "client_tool_policies": {"client__web__*": TIMED},
            "server_tool_policies": {"calculate": {"policy": "require_approval", "approval_timeout_s": 7}},
        }
    )
    assert config.client_rule("client__web__go") == Rule("require_approval", 60)
    assert config.client_policy("client__web__go") == "require_approval"
    assert config.server_rule("calculate") == Rule("require_approval", 7)


def test_a_step_hands_the_deadline_only_to_a_call_that_waits_for_approval() -> None:
    call = PlannedCall("call_1", "calculate", {})
    waits = StepCall.of(call, Route("server", "calculate", "require_approval", approval_timeout_ms=7000))
    assert waits.approval_timeout_ms == 7000
    assert '"approval_timeout_ms":7000' in waits.encode()
    allowed = StepCall.of(call, Route("server", "calculate", "allow", approval_timeout_ms=7000))
    assert allowed.approval_timeout_ms is None
    assert StepCall.of(call, Route("server", "calculate", "require_approval")).approval_timeout_ms is None
