"""A worker's share of the partitions: which it keeps, and when each of them next needs a look.

The live workers split the partitions among themselves (`broker.keepers`): each beats every quarter
lease, and keeps the partitions rendezvous hashing gives it among those alive. For each partition it
keeps, it knows when the next timer is due without reading anything in the meantime: the scripts that set
a timer earlier than the partition's alarm publish it on the alarm channel, and a visit (`visit`, which
reads what is due and arms the alarm again) answers when to come back. `w` on the same channel says new
work is in the partition's stream (`work`). The channels are one PSUBSCRIBE per worker, however many
partitions there are; nothing polls a partition on a short interval. A partition taken over (a worker
joined, left or died), a reconnected subscription and every `SWITCHBOARD_RESCAN_INTERVAL_S` are visited
and read for work at once, which catches a message lost with a connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import time
from collections.abc import Awaitable, Callable

from broker import Broker
from broker.services.alarms import Alarm, AlarmSubscription
from broker.services.keepers import owned
from broker.services.timers import Glance
from common.tasks import cancel_and_wait
from workers.backlog import Backlog
from workers.backoff import Backoff
from workers.settings import WorkerSettings

logger = logging.getLogger(__name__)

# The most partitions visited at once: a takeover or a rescan reads hundreds.
_VISITS_AT_ONCE = 16
# Superseded entries the visit heap may hold beyond twice its live ones before it is rebuilt.
_HEAP_SLACK = 1024
# Partitions read per round trip by a takeover or a rescan. Packing and parsing a pipeline holds the event
# loop, and a rescan of all 1,024 in one held it for tens of ms every rescan interval, which a decision
# waiting for its step then waited out; in slices the loop runs between them.
_GLANCED_AT_ONCE = 64
# Partitions due at once are visited together (`visit_many`), this many a pipeline, this many pipelines
# at once: a burst (thousands of schedules due at one instant) is a few round trips per node, and Redis
# is never left waiting for the next.
_PARTITIONS_PER_VISIT = 64
_PIPELINES_AT_ONCE = 4
# How long Redis gets to confirm the alarm subscription.
_SUBSCRIBE_S = 5.0


class Keeper:
    def __init__(
        self,
        broker: Broker[WorkerSettings],
        worker_id: str,
        host: str,
        *,
        visit: Callable[[int], Awaitable[int | None]],
        visit_many: Callable[[list[int]], Awaitable[dict[int, int | Exception | None]]] | None = None,
        work: Callable[[int], None],
        offers: tuple[str, ...] = (),
        backlog: Backlog | None = None,
    ) -> None:
        self._broker = broker
        self.worker_id = worker_id
        self._host = host
        # The platform providers this worker holds the deployment's keys for: offered with every beat,
        # for a lease (the API lists what the live workers offer).
        self._offers = offers
        self._visit = visit
        self._visit_many = visit_many
        self._work = work
        self.owned: frozenset[int] = frozenset()
        self._members: tuple[str, ...] = ()
        # Redis's clock minus this host's (ms): due times are Redis's.
        self._offset_ms = 0.0
        self._next: dict[int, int] = {}
        self._heap: list[tuple[int, int]] = []
        self._changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._limit = asyncio.Semaphore(_VISITS_AT_ONCE)
        self._pipelines = asyncio.Semaphore(_PIPELINES_AT_ONCE)
        # A burst of partitions due together holds new work back until visited (workers/backlog.py).
        self._backlog = backlog or Backlog()
        self._backoff = Backoff("visiting partitions")

    async def start(self) -> None:
        """Join the live workers, take this worker's share and start keeping it."""
        # Subscribed before the share is read: an alarm rung in between is either heard or already in
        # what the read finds.
        alarms = await self._broker.alarms.subscribe(_SUBSCRIBE_S)
        try:
            await self._beat()
        except BaseException:
            await alarms.close()
            raise
        self._tasks = [
            asyncio.create_task(self._beat_forever(), name="keeper-beat"),
            asyncio.create_task(self._listen(alarms), name="keeper-listen"),
            asyncio.create_task(self._clock(), name="keeper-clock"),
            asyncio.create_task(self._rescan_forever(), name="keeper-rescan"),
        ]

    async def stop(self, *, leave: bool = True) -> None:
        """Stop keeping; `leave` hands the partitions to the others at once rather than after a lease."""
        await cancel_and_wait(self._tasks)
        self._tasks = []
        if leave:
            with contextlib.suppress(Exception):
                await self._broker.keepers.leave(self.worker_id, self._host)

    def now_ms(self) -> int:
        """Redis's clock, as last measured against this host's."""
        return int(time.time() * 1000 + self._offset_ms)

    def ring(self, partition: int, due_ms: int) -> None:
        """Visit `partition` at `due_ms` (Redis's clock), unless it is to be visited sooner already."""
        if partition not in self.owned:
            return
        current = self._next.get(partition)
        if current is not None and current <= due_ms:
            return
        self._next[partition] = due_ms
        heapq.heappush(self._heap, (due_ms, partition))
        if len(self._heap) > 2 * len(self._next) + _HEAP_SLACK:
            # An entry a sooner ring superseded stays until its own time, which a wait's deadline puts
            # weeks away, so every step on a partition holding one left another: past twice what is live
            # the heap is rebuilt from the live entries alone.
            self._heap = [(due, number) for number, due in self._next.items()]
            heapq.heapify(self._heap)
        self._changed.set()

    async def _look_at(self, partitions: frozenset[int]) -> None:
        """Read `partitions` afresh (taken over, or their alarms may have been lost): each with a timer is
        visited when it is due, each with work waiting is read for it."""
        numbers = sorted(partitions)
        for first in range(0, len(numbers), _GLANCED_AT_ONCE):
            self._heed(await self._broker.timers.glance(numbers[first : first + _GLANCED_AT_ONCE]))

    def _heed(self, glances: list[Glance]) -> None:
        for glance in glances:
            if glance.failed:
                # Its node did not answer: the visit finds out when it answers again (and backs off).
                self.ring(glance.partition, self.now_ms())
                self._work(glance.partition)
                continue
            if glance.earliest_ms is not None:
                self.ring(glance.partition, glance.earliest_ms)
            if glance.has_work:
                self._work(glance.partition)

    async def _beat(self) -> None:
        sent = time.time() * 1000
        lease_s = self._broker.settings.keeper_lease_s
        redis_now, members = await self._broker.keepers.beat(self.worker_id, self._host, lease_s)
        self._offset_ms = redis_now - (sent + time.time() * 1000) / 2
        if self._offers:
            await self._broker.providers.offer(self._offers, round(lease_s * 1000))
        if tuple(members) == self._members:
            return
        before = self.owned
        self._members = tuple(members)
        self.owned = owned(members, self.worker_id)
        gained = self.owned - before
        if before or gained:
            share, among = len(self.owned), len(members)
            logger.info("keeping %d of the partitions among %d workers (%d new)", share, among, len(gained))
        if gained:
            await self._look_at(gained)

    async def _beat_forever(self) -> None:
        every = self._broker.settings.keeper_lease_s / 4
        while True:
            await asyncio.sleep(every)
            try:
                await self._beat()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("could not renew this worker's place among the live workers")

    async def _rescan_forever(self) -> None:
        while True:
            await asyncio.sleep(self._broker.settings.rescan_interval_s)
            try:
                await self._look_at(self.owned)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("could not read the kept partitions again; trying at the next rescan")

    async def _listen(self, alarms: AlarmSubscription | None) -> None:
        while True:
            try:
                if alarms is None:
                    alarms = await self._broker.alarms.subscribe(_SUBSCRIBE_S)
                    # What was rung while the connection was down reached nobody (a partition whose
                    # node does not answer is left to its visit).
                    await self._look_at(self.owned)
                while True:
                    alarm = await alarms.get(1.0)
                    if alarms.reconnected():
                        # Made again under the read: what was rung while it was down reached nobody.
                        await self._look_at(self.owned)
                    if alarm is not None:
                        self._on_alarm(alarm)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("alarm subscription lost; reconnecting")
                await asyncio.sleep(0.5)
            finally:
                if alarms is not None:
                    await alarms.close()
                    alarms = None

    def _on_alarm(self, alarm: Alarm) -> None:
        if alarm.partition not in self.owned:
            return
        if alarm.work:
            self._work(alarm.partition)
        elif alarm.due_ms is not None:
            self.ring(alarm.partition, alarm.due_ms)

    async def _clock(self) -> None:
        while True:
            now = self.now_ms()
            ready = []
            while self._heap and self._heap[0][0] <= now:
                due, partition = heapq.heappop(self._heap)
                if self._next.get(partition) == due:
                    del self._next[partition]
                    if partition in self.owned:
                        ready.append(partition)
            if ready and self._visit_many is not None and len(ready) > 1:
                step = _PARTITIONS_PER_VISIT
                # More than one pipeline's worth is a burst, which holds new work back (workers/backlog.py); a
                # few partitions due together (schedules spread over a minute) hold nothing back.
                burst = len(ready) > step
                await asyncio.gather(
                    *(self._visit_together(ready[i : i + step], burst) for i in range(0, len(ready), step))
                )
                continue
            if ready:
                await asyncio.gather(*(self._visit_one(partition) for partition in ready))
                continue
            wait = (self._heap[0][0] - now) / 1000 if self._heap else None
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), wait)

    async def _visit_one(self, partition: int) -> None:
        node = self._broker.node_of(partition)
        async with self._limit:
            wait_s = self._backoff.wait_s(node, partition)
            if wait_s > 0:
                self.ring(partition, self.now_ms() + round(wait_s * 1000))
                return
            try:
                next_due = await self._visit(partition)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self.ring(partition, self.now_ms() + round(self._backoff.failed(node, partition, error) * 1000))
                return
        self._backoff.succeeded(node, partition)
        if next_due is not None:
            self.ring(partition, next_due)

    async def _visit_together(self, partitions: list[int], burst: bool) -> None:
        assert self._visit_many is not None
        # A burst's visits are owed from now until done, their turn awaited included: the work waits for
        # them. Only a burst: a steady trickle of timers never delays the work.
        with self._backlog.owing() if burst else contextlib.nullcontext():
            async with self._pipelines:
                now = self.now_ms()
                nodes = {partition: self._broker.node_of(partition) for partition in partitions}
                visiting = []
                for partition, node in nodes.items():
                    wait_s = self._backoff.wait_s(node, partition)
                    if wait_s > 0:
                        self.ring(partition, now + round(wait_s * 1000))
                    else:
                        visiting.append(partition)
                if not visiting:
                    return
                try:
                    answers = await self._visit_many(visiting)
                except asyncio.CancelledError:
                    raise
                except Exception as error:
                    answers = dict.fromkeys(visiting, error)
            for partition in visiting:
                answer = answers.get(partition)
                if isinstance(answer, Exception):
                    wait_s = self._backoff.failed(nodes[partition], partition, answer)
                    self.ring(partition, self.now_ms() + round(wait_s * 1000))
                    continue
                self._backoff.succeeded(nodes[partition], partition)
                if answer is not None:
                    self.ring(partition, answer)
