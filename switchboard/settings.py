"""The command line's settings: the roles composed. Each command builds the settings of its own role
alone (switchboard/cli.py): `switchboard api` the API's (api/settings.py), `switchboard worker` and
`models try` a worker's (workers/settings.py), `keys mint` the broker's (broker/settings.py); these are
for the commands that stand for more than one role."""

from __future__ import annotations

from pathlib import Path

from api.settings import ApiSettings
from broker.settings import BrokerSettings
from workers.settings import WorkerSettings


class LocalSettings(BrokerSettings):
    """What only `switchboard up` (and `session new`, which finds its development key) reads."""

    data_dir: Path = Path("./.switchboard")

    @property
    def dev_key_path(self) -> Path:
        """Where `switchboard up` keeps its development API key."""
        return self.data_dir / "dev-api-key"


class LocalApiSettings(ApiSettings, LocalSettings):
    """`switchboard session new`: where the API of `switchboard up` answers, and its key (no worker's)."""


class Settings(ApiSettings, WorkerSettings, LocalSettings):
    """Every knob of a Switchboard deployment, the union of the roles: `switchboard up`, which starts the
    API and a worker and hands each the variables of its own role (switchboard/up.py).
    docs/configuration.md lists each field with its default."""
