"""Everything that touches Redis: keys, Lua scripts, the event log, call streams and deadlines."""

from broker.broker import Broker
from broker.errors import SwitchboardError
from broker.settings import BrokerSettings

__all__ = ["Broker", "BrokerSettings", "SwitchboardError"]
