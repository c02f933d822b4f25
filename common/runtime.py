"""Process tuning the API and the worker share."""

from __future__ import annotations

import asyncio
import gc
import importlib
from types import ModuleType

# A young collection every 50,000 net allocations rather than every 700. Thousands of open streams
# each keep a waiter alive between events, and at the default every event meant dozens of collections
# (measured: a quarter of the API's CPU at 5,000 streams, and a full collection every few events);
# cyclic garbage waits a little longer for its collection, a few MB at most.
YOUNG_THRESHOLD = 50_000


def settle_heap() -> None:
    """Call once start-up is done: what it built lives as long as the process, so it goes out of the
    collector's sight (a full collection then scans only what came after), and young collections are
    spaced for a server that keeps many objects waiting."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


async def imported(name: str) -> ModuleType:
    """The module `name`, imported in a thread if it is not yet: a large package (a provider's SDK, the `mcp`
    client) is loaded on first use rather than at start, without stopping the loop for the second or more
    its import takes. import_module, not a look in sys.modules: while another task's thread imports the
    module it is there half-initialized, and import_module waits on the module's import lock instead."""
    module = _IMPORTED.get(name)
    if module is None:
        module = _IMPORTED[name] = await asyncio.to_thread(importlib.import_module, name)
    return module


# The modules `imported` has seen whole, so a later use costs no thread.
_IMPORTED: dict[str, ModuleType] = {}
