"""The settings split by role, each where its role is (broker/, api/, workers/; the command line composes
them): the API's have no model provider's key, so an API process never reads one; a worker's do; the full
set is exactly the roles together. tests/e2e/test_api_settings.py holds a real API process to it."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from pydantic import SecretStr

from api.settings import ApiSettings
from broker.settings import BrokerSettings
from common.settings import ProcessSettings, env_names
from switchboard.settings import LocalSettings, Settings
from switchboard.up import role_env
from workers.settings import WorkerSettings

OPENAI_KEY = "sk-openai-only-the-worker-may-hold-this"
ANTHROPIC_KEY = "sk-ant-only-the-worker-may-hold-this"
BOOTSTRAP_KEY = "swb_ak_" + "b" * 40
PROVIDER_KEYS = {"openai_api_key", "anthropic_api_key"}
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SWITCHBOARD_OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("switchboard_anthropic_api_key", ANTHROPIC_KEY)
    monkeypatch.setenv("SWITCHBOARD_BOOTSTRAP_API_KEY", BOOTSTRAP_KEY)


def test_the_apis_settings_have_no_provider_key_and_no_other_worker_secret() -> None:
    assert not PROVIDER_KEYS & set(ApiSettings.model_fields)
    worker_only = (
        set(WorkerSettings.model_fields) - set(ProcessSettings.model_fields) - set(BrokerSettings.model_fields)
    )
    assert not worker_only & set(ApiSettings.model_fields)
    secrets = {name for name, field in ApiSettings.model_fields.items() if "SecretStr" in str(field.annotation)}
    assert secrets == {"bootstrap_api_key", "secret_key"}
    assert set(WorkerSettings.model_fields) >= PROVIDER_KEYS


@pytest.mark.usefixtures("environment")
def test_an_api_built_where_the_keys_are_set_holds_neither() -> None:
    settings = ApiSettings()
    held = [repr(settings), str(settings.model_dump()), settings.model_dump_json(), repr(vars(settings))]
    held.append(repr(settings.model_extra))
    for text in held:
        assert OPENAI_KEY not in text
        assert ANTHROPIC_KEY not in text
    assert not any(hasattr(settings, name) for name in PROVIDER_KEYS)
    # What the API is for, it does read.
    assert settings.bootstrap_api_key == SecretStr(BOOTSTRAP_KEY)


@pytest.mark.usefixtures("environment")
def test_a_worker_holds_the_keys_and_not_the_bootstrap_key() -> None:
    settings = WorkerSettings()
    assert settings.openai_api_key == SecretStr(OPENAI_KEY)
    assert settings.anthropic_api_key == SecretStr(ANTHROPIC_KEY)
    assert not hasattr(settings, "bootstrap_api_key")
    assert BOOTSTRAP_KEY not in settings.model_dump_json()


def test_each_roles_settings_live_with_the_role() -> None:
    assert BrokerSettings.__module__ == "broker.settings"
    assert ApiSettings.__module__ == "api.settings"
    assert WorkerSettings.__module__ == "workers.settings"
    assert ProcessSettings.__module__ == "common.settings"
    assert {LocalSettings.__module__, Settings.__module__} == {"switchboard.settings"}
    # The broker's module declares the broker's settings and nothing of another role.
    tree = ast.parse((ROOT / "broker" / "settings.py").read_text())
    assert [node.name for node in tree.body if isinstance(node, ast.ClassDef)] == ["BrokerSettings"]
    assert set(BrokerSettings.model_fields).isdisjoint({"port", "host", "bootstrap_api_key", *PROVIDER_KEYS})


def _named(package: str) -> set[str]:
    """The names `package`'s code uses or imports, and the top-level packages it imports from."""
    found: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name):
                found.add(node.id)
            elif isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found |= {node.module.split(".")[0], *(alias.name for alias in node.names)}
    return found


def test_the_api_never_builds_a_workers_or_the_full_settings() -> None:
    # What the API process builds is ApiSettings (switchboard/cli.py): nothing in api/ can name the
    # worker's settings or the union of the roles, so constructing the API never reads a provider key.
    used = _named("api")
    assert not used & {"WorkerSettings", "Settings", "LocalSettings", "workers", "switchboard"}


def test_the_full_set_is_the_roles_together_each_field_declared_once() -> None:
    roles = (ApiSettings, WorkerSettings, LocalSettings)
    assert env_names(Settings) == frozenset().union(*(env_names(role) for role in roles))
    assert len(env_names(Settings)) == len(Settings.model_fields)
    assert all(name.startswith("SWITCHBOARD_") for name in env_names(Settings))
    # Shared groups come by inheritance: no class declares a field another one already has.
    declared: dict[str, str] = {}
    for kind in (BrokerSettings, ProcessSettings, ApiSettings, WorkerSettings, LocalSettings, Settings):
        for name in inspect.get_annotations(kind):
            assert name not in declared, f"{name} is declared in {declared[name]} and {kind.__name__}"
            declared[name] = kind.__name__
    assert set(declared) == set(Settings.model_fields)
    # Every role has what the broker reads.
    for role in roles:
        assert set(BrokerSettings.model_fields) <= set(role.model_fields)


def test_switchboard_up_hands_each_child_the_variables_of_its_role() -> None:
    env = {
        "PATH": "/usr/bin",
        "SWITCHBOARD_REDIS_URL": "redis://127.0.0.1:6379/0",
        "SWITCHBOARD_OPENAI_API_KEY": OPENAI_KEY,
        "switchboard_anthropic_api_key": ANTHROPIC_KEY,
        "SWITCHBOARD_BOOTSTRAP_API_KEY": BOOTSTRAP_KEY,
        "SWITCHBOARD_PORT": "8000",
        "SWITCHBOARD_MAX_STEPS": "9",
        "SWITCHBOARD_HOST": "127.0.0.2",
        "SWITCHBOARD_DATA_DIR": "/tmp/sb",
        # Not a setting: left to whoever reads it.
        "SWITCHBOARD_HANG_LOG": "/tmp/hangs",
    }
    api = role_env(env, ApiSettings)
    assert OPENAI_KEY not in api.values()
    assert ANTHROPIC_KEY not in api.values()
    assert set(api) == {
        "PATH",
        "SWITCHBOARD_REDIS_URL",
        "SWITCHBOARD_BOOTSTRAP_API_KEY",
        "SWITCHBOARD_PORT",
        "SWITCHBOARD_HOST",
        "SWITCHBOARD_HANG_LOG",
    }
    worker = role_env(env, WorkerSettings)
    assert set(worker) == {
        "PATH",
        "SWITCHBOARD_REDIS_URL",
        "SWITCHBOARD_OPENAI_API_KEY",
        "switchboard_anthropic_api_key",
        "SWITCHBOARD_MAX_STEPS",
        "SWITCHBOARD_HOST",
        "SWITCHBOARD_HANG_LOG",
    }
