"""Webhooks in a worker: the notice consumer that writes an event's deliveries, and the sender that takes
due deliveries and sends them, signed as Standard Webhooks says.

Sending never holds a run: a notice's deliveries are written in one script and sent by a loop of their
own. Each delivery taken is held under a lease (broker/services/deliveries.py); an endpoint has at most
SWITCHBOARD_WEBHOOK_ENDPOINT_CONCURRENCY in flight across the workers and a worker at most
SWITCHBOARD_WEBHOOK_CONCURRENCY of every endpoint, so a slow or dead endpoint holds only its own share
and the others' deliveries go on. Each attempt goes to an address checked for that very connection
(workers/pinned.py: no private address unless SWITCHBOARD_PROVIDER_ALLOW_PRIVATE, no redirect followed)
and gets SWITCHBOARD_WEBHOOK_TIMEOUT_S.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import httpx2

from broker import Broker
from broker.errors import AddressRefused
from broker.services.deliveries import AttemptOutcome, Taken
from common.addresses import ProviderAddresses
from common.events.catalogue import NOTICES, type_name
from common.tasks import cancel_and_wait
from common.webhooks import body, headers
from workers.metrics import WorkerMetrics
from workers.notices import Notice
from workers.pinned import pinned_client
from workers.retry_after import retry_after_s
from workers.settings import WorkerSettings

logger = logging.getLogger(__name__)

WHAT = "the webhook endpoint"
# How often an idle sender looks for deliveries due (retries, and those another worker wrote).
POLL_S = 0.5
# A lease outlives an attempt's timeout by this much, so no attempt is still running when it lapses.
_LEASE_MARGIN_S = 5.0
# Endpoints read per look: the schedule is earliest first, so those past it wait for the next look.
_ENDPOINTS_PER_LOOK = 64
# The HTTP clients kept (one per endpoint URL, for its connections); past this they are all dropped.
_CLIENTS_KEPT = 256
# An answer's body is read up to this (to keep its connection), never kept.
_BODY_READ = 65_536
_GONE_REASON = "the endpoint answered 410 Gone"


class WebhookConsumer:
    """The notice consumer: writes the event's deliveries (once, however often it is handed the notice),
    and hands this worker's sender those it took."""

    def __init__(self, broker: Broker, sender: WebhookSender) -> None:
        self._broker = broker
        self._sender = sender

    async def __call__(self, notice: Notice) -> None:
        kind = NOTICES.get(type_name(type(notice.event)))
        if kind is None:
            return
        endpoints = await self._broker.webhooks.subscribers(kind)
        if not endpoints:
            return
        sent = body(kind, notice.event.created_at, notice.session_id, notice.run_id, notice.subject, notice.raw)
        # The deliveries this worker has room for are taken as they are written, and sent at once.
        written, taken = await self._broker.deliveries.enqueue(
            endpoints,
            kind=kind,
            session_id=notice.session_id,
            seq=notice.seq,
            subject=notice.subject,
            agent_id=notice.agent_id,
            body=sent,
            most=self._sender.room,
            lease_ms=self._sender.lease_ms,
        )
        self._sender.send(taken)
        if written > len(taken):
            self._sender.wake()


class WebhookSender:
    def __init__(self, broker: Broker[WorkerSettings], addresses: ProviderAddresses, metrics: WorkerMetrics) -> None:
        self._broker = broker
        self._addresses = addresses
        self._metrics = metrics
        settings = broker.settings
        self._timeout_s = settings.webhook_timeout_s
        self._delays = settings.webhook_retry_delays
        self._most = settings.webhook_concurrency
        self.lease_ms = round((settings.webhook_timeout_s + _LEASE_MARGIN_S) * 1000)
        self._woken = asyncio.Event()
        self._sending: set[asyncio.Task[None]] = set()
        self._clients: dict[str, httpx2.AsyncClient] = {}
        # One TLS context for every endpoint's client: building one reads the CA bundle (tens of ms of the
        # event loop), which would otherwise stall every delivery each time a new endpoint is first sent to.
        self._tls = httpx2.create_ssl_context()
        self._loop: asyncio.Task[None] | None = None
        self._stopped = False

    def start(self) -> None:
        self._loop = asyncio.create_task(self._send_forever(), name="webhooks")

    def wake(self) -> None:
        self._woken.set()

    @property
    def room(self) -> int:
        """How many more attempts this worker would take on now (none once it stops)."""
        return 0 if self._stopped else max(0, self._most - len(self._sending))

    def send(self, taken: list[Taken]) -> None:
        """Attempt deliveries this worker holds (taken under its lease; once it stopped, their leases lapse
        and another worker attempts them)."""
        if self._stopped:
            return
        for one in taken:
            task = asyncio.create_task(self._send(one), name=f"webhook-{one.delivery_id}")
            self._sending.add(task)
            task.add_done_callback(self._ended)

    async def stop(self, timeout_s: float) -> None:
        """Take no more; wait up to `timeout_s` for the attempts running (the others' leases lapse)."""
        self._stopped = True
        if self._loop is not None:
            await cancel_and_wait([self._loop])
        if self._sending:
            _, left = await asyncio.wait(set(self._sending), timeout=timeout_s)
            await cancel_and_wait(left)
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

    async def _send_forever(self) -> None:
        deliveries = self._broker.deliveries
        while True:
            # Cleared before looking, not after: a wake while a look is under way is for what it missed.
            self._woken.clear()
            room = self._most - len(self._sending)
            taken: list[Taken] = []
            if room > 0:
                try:
                    due = await deliveries.due(_ENDPOINTS_PER_LOOK)
                    taken = await deliveries.take(due, most=room, lease_ms=self.lease_ms)
                except asyncio.CancelledError:
                    raise
                except Exception as error:
                    logger.warning("could not take webhook deliveries (trying again): %s", error)
            self.send(taken)
            if taken and len(taken) == room:
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_S):
                    await self._woken.wait()

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._sending.discard(task)
        self._woken.set()

    def _client(self, url: str) -> httpx2.AsyncClient:
        client = self._clients.get(url)
        if client is None:
            if len(self._clients) >= _CLIENTS_KEPT:
                dropped, self._clients = list(self._clients.values()), {}
                for old in dropped:
                    asyncio.get_running_loop().create_task(old.aclose())
            client = self._clients[url] = pinned_client(url, self._addresses, self._timeout_s, WHAT, verify=self._tls)
        return client

    async def _send(self, taken: Taken) -> None:
        self._metrics.webhook_sending.inc()
        try:
            outcome, status, error, delay_s = await self._attempt(taken)
            if outcome == "retry" and taken.tries > len(self._delays):
                outcome, error = "failed", f"{error}; gave up after {taken.tries} attempts"
            elif outcome == "retry":
                delay_s = max(delay_s or 0.0, self._delays[taken.tries - 1])
            self._metrics.webhook_attempts.labels(outcome).inc()
            await self._broker.deliveries.record(
                taken, outcome, status_code=status, error=error, delay_ms=round((delay_s or 0.0) * 1000),
                reason=_GONE_REASON if outcome == "gone" else "",
            )  # fmt: skip
        except asyncio.CancelledError:
            raise
        except Exception:
            # Its lease lapses and the delivery is attempted again.
            logger.exception("webhook delivery %s: the attempt's outcome was not recorded", taken.delivery_id)
        finally:
            self._metrics.webhook_sending.dec()

    async def _attempt(self, taken: Taken) -> tuple[AttemptOutcome, int | None, str, float | None]:
        """One attempt: its outcome, the status answered, what went wrong, and a Retry-After's wait."""
        sent = headers(taken.secret, taken.delivery_id, int(time.time()), taken.body)
        client = self._client(taken.url)
        try:
            async with asyncio.timeout(self._timeout_s):
                request = client.build_request("POST", taken.url, content=taken.body, headers=sent)
                response = await client.send(request, stream=True)
                try:
                    # Its status is all a delivery needs; a short body is read so the connection is kept
                    # for the next attempt (one closed unread cannot be reused), a long one is not.
                    read = 0
                    async for chunk in response.aiter_raw():
                        read += len(chunk)
                        if read > _BODY_READ:
                            break
                finally:
                    await response.aclose()
        except AddressRefused as error:
            return "failed", None, str(error), None
        except (TimeoutError, httpx2.TimeoutException):
            return "retry", None, f"no answer within {self._timeout_s:g} s", None
        except httpx2.HTTPError as error:
            refused = error.__cause__ or error.__context__
            if isinstance(refused, AddressRefused):
                return "failed", None, str(refused), None
            return "retry", None, f"could not connect: {error}"[:500], None
        code = response.status_code
        if 200 <= code < 300:
            return "succeeded", code, "", None
        if code == 410:
            return "gone", code, "410 Gone: the endpoint is disabled", None
        if code in (408, 429) or code >= 500:
            return "retry", code, f"answered {code}", retry_after_s(response.headers.get("retry-after"))
        return "failed", code, f"answered {code}", None
