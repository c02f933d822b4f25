r"""Every Redis key and channel name Switchboard uses, built in this one place.

All names start with the deployment prefix (`sb` unless `SWITCHBOARD_KEY_PREFIX` says otherwise). Every
key carries a hash tag, and no script touches two tags, so every script runs on a Redis Cluster:

- `{w}`: the workspace (keys, agents, versions, providers, the session list, the live workers);
- `{T}`: a partition (`broker/partitions.py`: 1,024 of them, fixed for the life of a deployment, each tag
  chosen to sit in slot 16 x its number, so any number of masters gets an even share). A session belongs
  to the partition its id hashes to (CRC32 of the id, mod 1,024); all of its keys and the partition's own
  indexes share the partition's tag, so one script can act on a session and its partition's timers,
  work stream and figures together.

Keys a session owns sit under `sb:{T}:s:<session id>:`.

| key                                   | type   | TTL                      | owner / written by                     |
| ------------------------------------- | ------ | ------------------------ | -------------------------------------- |
| `sb:{w}:workspace`                    | string | none                     | API start: the workspace id (SET NX)   |
| `sb:{w}:partitions`                   | string | none                     | first start: the partition count       |
| `sb:{w}:apikeys`                      | zset   | none                     | key ids, lex-ordered (UUIDv7)          |
| `sb:{w}:apikey:<id>`                  | hash   | none                     | one API key's record, its ancestors    |
| `sb:{w}:apikey-secret:<sha256>`       | hash   | none                     | secret hash -> what auth reads: id,    |
|                                       |        |                          | permissions, expiry, ancestors, revoked|
| `sb:{w}:apikeys-revoked`              | hash   | none                     | revoked key id -> when (ms): a key with|
|                                       |        |                          | one among its ancestors is refused     |
|                                       |        |                          | (auth_key.lua)                         |
| `sb:{w}:agents`                       | zset   | none                     | agent ids                              |
| `sb:{w}:agent:<id>`                   | hash   | none                     | agent record, live version, security   |
| `sb:{w}:agent:<id>:versions`          | zset   | none                     | version ids of one agent               |
| `sb:{w}:agent:<id>:sessions`          | set    | none                     | session ids of one agent (delete)      |
| `sb:{w}:version:<id>`                 | hash   | none                     | one published version; `secrets`: the  |
|                                       |        |                          | MCP grants' credentials (never shown)  |
| `sb:{w}:providers`                    | zset   | none                     | BYOK model provider ids                |
| `sb:{w}:provider:<id>`                | hash   | none                     | BYOK provider record (holds its key)   |
| `sb:{w}:platform:<id>`                | string | a keeper lease           | a live worker holds the deployment's   |
|                                       |        |                          | key for this platform provider (each   |
|                                       |        |                          | beat renews it): what the API lists    |
| `sb:{w}:sessions`                     | zset   | none                     | session ids (written before the session|
|                                       |        |                          | is, so a reader skips ids with no meta)|
| `sb:{w}:idem:<digest>`                | string | idempotency TTL          | receipts of workspace routes: JSON     |
|                                       |        |                          | while claimed, `<outcome> <fp> <body>` |
|                                       |        |                          | once settled (idem_finish.lua)         |
| `sb:{w}:keepers`                      | zset   | none (members lapse)     | live workers by lease end (keepers.lua)|
| `sb:{w}:timers-armed`                 | string | none                     | `1` once every session has its timers  |
|                                       |        |                          | (services/retention.py, on upgrade)   |
| `sb:{w}:health:<host>`                | string | 3 heartbeats             | `switchboard worker --check`           |
| `sb:{w}:webhooks`                     | zset   | none                     | webhook endpoint ids, lex-ordered      |
| `sb:{w}:webhook:<id>`                 | hash   | none                     | one endpoint: url, events, filters,    |
|                                       |        |                          | enabled, disabled_reason, secret       |
| `sb:{w}:webhook:<id>:log`             | zset   | none (trimmed to the     | its delivery ids by creation ms        |
|                                       |        | webhook log size)        | (listed newest first)                  |
| `sb:{w}:webhook:<id>:deliveries`      | hash   | none (trimmed with log)  | delivery id -> record JSON; `<id>:body`|
|                                       |        |                          | -> the body sent                       |
| `sb:{w}:webhook:<id>:due`             | zset   | none                     | pending delivery ids by next attempt ms|
|                                       |        |                          | (a taken one: by its lease's end)      |
| `sb:{w}:webhook:<id>:sending`         | zset   | none (members lapse)     | delivery ids being sent, by lease end  |
| `sb:{w}:webhooks-due`                 | zset   | none                     | endpoint ids by when one of theirs is  |
|                                       |        |                          | next to send (lib/webhooks.lua)        |
| `sb:{w}:webhooks-for:<type>`          | set    | none                     | endpoint ids subscribed to a webhook   |
|                                       |        |                          | event type (`run.completed`, ...)      |
| `sb:{w}:inbox:items`                  | hash   | none                     | `<sid>\|<call id>` -> the open inbox  |
|                                       |        |                          | item's JSON (services/inbox.py,        |
|                                       |        |                          | inbox_change.lua)                      |
| `sb:{w}:inbox:ix[:<filters>]`         | zset   | none                     | open items, one zset per combination of|
|                                       |        |                          | the filters (`:k:<kind>`, `:a:<agent>`,|
|                                       |        |                          | `:u:<subject>`, in that order; 8 an    |
|                                       |        |                          | item), members `<since ms, 15 digits>\|`|
|                                       |        |                          | `<sid>\|<call id>` at score 0: lex     |
|                                       |        |                          | order is `since`, ties by session, call|
| `sb:{w}:inbox:s:<sid>`                | hash   | token TTL once the       | call id -> the seq of the last notice  |
|                                       |        | session is deleted       | applied (a replay older than it is     |
|                                       |        |                          | ignored); `~gone` once deleted         |
| `sb:{w}:mcp:connection:<id>`          | hash   | none                     | one MCP grant's OAuth connection: its  |
|                                       |        |                          | owner, grant, server URL, scopes,      |
|                                       |        |                          | expiry, `tokens` sealed (AES-GCM, a key|
|                                       |        |                          | derived from SWITCHBOARD_SECRET_KEY),  |
|                                       |        |                          | `endpoint` sealed (how to refresh      |
|                                       |        |                          | them), `refreshing` (a worker's claim) |
|                                       |        |                          | (services/mcp_connections.py)          |
| `sb:{w}:mcp:connections:<owner>`      | zset   | none                     | an owner's connection ids (`u:<subject>`|
|                                       |        |                          | or `s:<sid>`), lex-ordered             |
| `sb:{w}:mcp:challenge:<S>:<grant>`    | hash   | a sign-in's wait         | the grant's server's last challenge to |
|                                       |        |                          | the session, the scope refused, the    |
|                                       |        |                          | step-ups counted (note_mcp_challenge)  |
| `sb:{w}:mcp:authorization:<digest>`   | hash   | its wait and a day       | a pending MCP sign-in by its state's   |
|                                       |        |                          | SHA-256: session, grant, server URL,   |
|                                       |        |                          | `expires_at`, `flow` (sealed); `used`  |
|                                       |        |                          | once taken (*_mcp_authorization.lua)   |
| `sb:{T}:s:<S>:meta`                   | hash   | token TTL once deleted   | session record, event seq, tombstone,  |
|                                       |        |                          | `event_at` (ms of the newest event,    |
|                                       |        |                          | written with the seq: its retention),  |
|                                       |        |                          | `trimmed_seq` (trim_calls.lua),        |
|                                       |        |                          | `bytes`, `rc` `rp` `ra` `rl` (receipts |
|                                       |        |                          | by window): the session's storage      |
|                                       |        |                          | (lib/core.lua sb_room),                |
|                                       |        |                          | `queued:<run id>` per waiting input,   |
|                                       |        |                          | `waiting:<client name>`: the calls     |
|                                       |        |                          | waiting for a registration of that name|
|                                       |        |                          | (JSON array of call ids; on_leave wait:|
|                                       |        |                          | lib/calls.lua sb_park); a field, not a |
|                                       |        |                          | key, so every script that may settle a |
|                                       |        |                          | call (each holds meta) drops it there, |
|                                       |        |                          | `subject` when created with one,       |
|                                       |        |                          | `created_by` `api_key:<id>` and its    |
|                                       |        |                          | `created_by_label` (short: a listpack) |
| `sb:{T}:s:<S>:events`                 | stream | none                     | the event log, ids `<seq>-0`           |
| `sb:{T}:s:<S>:tokens`                 | hash   | token TTL once deleted   | token hash -> `<expires ms> <id>`      |
| `sb:{T}:s:<S>:names`                  | hash   | none                     | active client name -> client id        |
| `sb:{T}:s:<S>:clients`                | set    | none                     | every client id ever (purge)           |
| `sb:{T}:s:<S>:client:<cid>`           | hash   | idempotency TTL once     | one registration; a ttl one's lease is |
|                                       |        | it left or lapsed        | its `expires_at`; once gone only its   |
|                                       |        |                          | state, name and lease fields stay      |
| `sb:{T}:s:<S>:client:<cid>:calls`     | stream | none (trimmed by age;    | calls for the registration's pool;     |
|                                       |        | deleted when it leaves)  | group `pool`, a consumer per member;   |
|                                       |        |                          | an entry goes when its call is acked,  |
|                                       |        |                          | the stream with it when left empty and |
|                                       |        |                          | no group                               |
| `sb:{T}:s:<S>:calls`                  | hash   | none (settled ones       | call id -> call record (JSON); a       |
|                                       |        | trimmed: trim_calls.lua) | grant's parked call keeps its task or  |
|                                       |        |                          | input round in it (`gt`:               |
|                                       |        |                          | park_server_call.lua,                  |
|                                       |        |                          | ask_grant_input.lua)                   |
| `sb:{T}:s:<S>:owed`                   | hash   | none                     | unsettled call id -> client id         |
| `sb:{T}:s:<S>:run`                    | hash   | none                     | the active run's state                 |
| `sb:{T}:s:<S>:inbox`                  | list   | none                     | steering input for the active run      |
| `sb:{T}:s:<S>:trace:<run id>`         | hash   | SWITCHBOARD_MAX_WAIT_S   | a traced run's trace context (only when|
|                                       |        | + 1 day (deleted when    | tracing is on): the caller's           |
|                                       |        | the run's span is made)  | traceparent, start, summed usage, the  |
|                                       |        |                          | last step's calls (services/traces.py) |
| `sb:{T}:s:<S>:queue`                  | list   | none                     | input waiting for a run of its own     |
| `sb:{T}:s:<S>:idem:<digest>`          | string | idempotency TTL          | receipts of session routes             |
| `sb:{T}:s:<S>:inputs`                 | hash   | none (a call's go with   | input request id -> its entry (JSON);  |
|                                       |        | its record: trim_calls;  | `k:<len>:<call id>:<key>` -> the id    |
|                                       |        | unlinked by the purge)   | holding that key in its call           |
|                                       |        |                          | (ask_input.lua, answer_input.lua)      |
| `sb:{T}:s:<S>:schedules`              | hash   | none (deleted with the   | schedule id -> its record (JSON):      |
|                                       |        | session)                 | create_schedule.lua, fire_schedule.lua |
| `sb:{T}:s:<S>:mcp_authorizations`     | hash   | none (unlinked by the    | MCP sign-in id -> its record (JSON:    |
|                                       |        | purge)                   | grant, server, state, expires_at, run  |
|                                       |        |                          | that asked, wait: the run waiting on   |
|                                       |        |                          | it); `g:<grant>`                       |
|                                       |        |                          | -> the grant's latest sign-in id       |
|                                       |        |                          | (*_mcp_authorization.lua)              |
| `sb:{T}:deadlines`                    | zset   | none                     | `<sid>:<call id>` by due time (ms):    |
|                                       |        |                          | ack, result, server call lease, the end|
|                                       |        |                          | of a wait for the call's client, an    |
|                                       |        |                          | approval's approval_timeout_s, a parked|
|                                       |        |                          | grant call's next poll or its end;     |
|                                       |        |                          | `<sid>:mcp-authorization:<id>` the end |
|                                       |        |                          | of a sign-in a waiting step needs      |
| `sb:{T}:leases`                       | zset   | none                     | `<sid>:<cid>` due no later than the    |
|                                       |        |                          | registration's expiry                  |
| `sb:{T}:steps`                        | zset   | none                     | `<sid>` by its running step's lease    |
| `sb:{T}:dequeue`                      | zset   | none                     | `<sid>` by its debounce timer          |
| `sb:{T}:purge`                        | zset   | none                     | deleted session ids left to purge;     |
|                                       |        |                          | `r\|<sid>` retention, `c\|<sid>` trim  |
|                                       |        |                          | timers of live sessions                |
| `sb:{T}:claims`                       | zset   | none                     | work entry ids taken, by claim lapse   |
| `sb:{T}:schedules`                    | zset   | none                     | `<sid>:<schedule id>` by its next fire |
|                                       |        |                          | time (ms): fire_schedule.lua moves it  |
| `sb:{T}:work`                         | stream | none (entries deleted    | work for the workers: `s|sid|run|step| |
|                                       |        | when begun)              | attempt`, `t|sid|call`, `d|sid|client`,|
|                                       |        |                          | `n|sid|seq` (a notable event's notice);|
|                                       |        |                          | group `workers`, a consumer per worker |
| `sb:{T}:alarm`                        | string | none                     | earliest due time the timekeeper knows |
| `sb:{T}:handed`                       | string | none                     | when a sweep last handed due members to|
|                                       |        |                          | a keeper (ms); deleted by a sweep that |
|                                       |        |                          | finds none: sweep.lua, read by glance  |
| `sb:{T}:stats`                        | hash   | none                     | the partition's figures (the last key  |
|                                       |        |                          | of every script with lib/partition.lua)|

Channels (pub/sub, not keys): `sb:{T}:s:<S>:live` carries every appended event of a session as its JSON,
and the text `deleted` when the session is deleted. `sb:{T}:alarm` carries a due time (ms) when a timer
comes before the partition's alarm, and `w` when work is added: the workers PSUBSCRIBE `sb:{*}:alarm`.
`sb:hub` is subscribed by every API process and never published on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.partitions import PARTITIONS, partition_of, partition_of_tag, tag

# The consumer group on a registration's call stream; each pool member is a consumer of it.
POOL_GROUP = "pool"
# The consumer group on a partition's work stream; each worker is a consumer of it (lib/partition.lua
# names it too; tests/unit/test_layout.py holds the two equal).
WORK_GROUP = "workers"

# A session id is a canonical UUID, so members of the partition indexes split at a fixed offset.
_UUID_LEN = 36
# What a sign-in's id follows in the deadlines index, where the rest of a member is a call id
# (KeySpace.sign_in_deadline).
SIGN_IN_DEADLINE = "mcp-authorization:"


@dataclass(frozen=True, slots=True)
class PartitionKeys:
    """The keys of one partition: its timer indexes, work stream, figures and alarm, under its hash tag."""

    base: str
    number: int

    @property
    def deadlines(self) -> str:
        return f"{self.base}:deadlines"

    @property
    def leases(self) -> str:
        return f"{self.base}:leases"

    @property
    def steps(self) -> str:
        return f"{self.base}:steps"

    @property
    def dequeue(self) -> str:
        return f"{self.base}:dequeue"

    @property
    def purges(self) -> str:
        return f"{self.base}:purge"

    @property
    def claims(self) -> str:
        return f"{self.base}:claims"

    @property
    def schedules(self) -> str:
        """The partition's schedules by next fire time (members `<sid>:<schedule id>`)."""
        return f"{self.base}:schedules"

    @property
    def work(self) -> str:
        return f"{self.base}:work"

    @property
    def alarm(self) -> str:
        """The earliest due time the timekeeper was told of; also the channel that tells it."""
        return f"{self.base}:alarm"

    @property
    def handed(self) -> str:
        """When a sweep last handed due members to a keeper that may not have acted on them yet."""
        return f"{self.base}:handed"

    @property
    def stats(self) -> str:
        """The partition's call, client and run figures (lib/partition.lua), summed by /metrics/cluster."""
        return f"{self.base}:stats"

    @property
    def timers(self) -> tuple[str, ...]:
        return (self.deadlines, self.leases, self.steps, self.dequeue, self.purges, self.claims, self.schedules)

    @property
    def block(self) -> list[str]:
        """The keys every script that includes lib/partition.lua gets last, in its order."""
        return [*self.timers, self.work, self.alarm, self.stats]


@dataclass(frozen=True, slots=True)
class SessionKeys:
    """The keys of one session; every name carries its partition's hash tag."""

    base: str
    session_id: str
    partition: PartitionKeys

    @property
    def meta(self) -> str:
        return f"{self.base}:meta"

    @property
    def events(self) -> str:
        return f"{self.base}:events"

    @property
    def tokens(self) -> str:
        return f"{self.base}:tokens"

    @property
    def names(self) -> str:
        return f"{self.base}:names"

    @property
    def clients(self) -> str:
        return f"{self.base}:clients"

    @property
    def calls(self) -> str:
        return f"{self.base}:calls"

    @property
    def owed(self) -> str:
        return f"{self.base}:owed"

    @property
    def run(self) -> str:
        return f"{self.base}:run"

    @property
    def inbox(self) -> str:
        return f"{self.base}:inbox"

    @property
    def queue(self) -> str:
        return f"{self.base}:queue"

    @property
    def schedules(self) -> str:
        """The session's schedules: schedule id -> record JSON."""
        return f"{self.base}:schedules"

    @property
    def mcp_authorizations(self) -> str:
        """The session's MCP sign-ins: id -> record JSON, and `g:<grant>` -> the grant's latest one."""
        return f"{self.base}:mcp_authorizations"

    @property
    def inputs(self) -> str:
        """The session's input requests: request id -> entry JSON, and each call's keys (`input_key_field`)."""
        return f"{self.base}:inputs"

    @staticmethod
    def input_key_field(call_id: str, key: str) -> str:
        """The field holding the request a key names within its call; the call id's length in bytes comes
        first, as a call id may hold any character (trim_calls.lua builds it again with Lua's `#`)."""
        return f"k:{len(call_id.encode())}:{call_id}:{key}"

    @property
    def live(self) -> str:
        """The pub/sub channel of the session's appended events."""
        return f"{self.base}:live"

    def trace(self, run_id: str) -> str:
        """A traced run's trace context (broker/services/traces.py)."""
        return f"{self.base}:trace:{run_id}"

    def client(self, client_id: str) -> str:
        return f"{self.base}:client:{client_id}"

    def client_calls(self, client_id: str) -> str:
        return f"{self.base}:client:{client_id}:calls"

    def idempotency(self, digest: str) -> str:
        return f"{self.base}:idem:{digest}"


@dataclass(frozen=True, slots=True)
class WebhookKeys:
    """The keys of one webhook endpoint, in the workspace's slot."""

    endpoint: str
    endpoint_id: str

    @property
    def log(self) -> str:
        return f"{self.endpoint}:log"

    @property
    def deliveries(self) -> str:
        return f"{self.endpoint}:deliveries"

    @property
    def due(self) -> str:
        return f"{self.endpoint}:due"

    @property
    def sending(self) -> str:
        return f"{self.endpoint}:sending"

    @property
    def block(self) -> list[str]:
        """What lib/webhooks.lua is handed per endpoint, in its order."""
        return [self.endpoint, self.log, self.deliveries, self.due, self.sending]


# Sessions whose keys a KeySpace keeps built: more than a process serves at once, small beside its memory.
_SESSIONS_KEPT = 4096


@dataclass(frozen=True, slots=True)
class KeySpace:
    """Builds every key name from the deployment prefix."""

    prefix: str = "sb"
    # A hot route names its session's keys several times (receipt, call, script); building them is a CRC32,
    # a tag lookup and a dozen strings each time.
    _sessions: dict[str, SessionKeys] = field(default_factory=dict, init=False, repr=False, compare=False)

    # Workspace.
    @property
    def workspace(self) -> str:
        return f"{self.prefix}:{{w}}:workspace"

    @property
    def partition_count(self) -> str:
        """The number of partitions the deployment was created with (SET NX at first start)."""
        return f"{self.prefix}:{{w}}:partitions"

    @property
    def api_keys(self) -> str:
        return f"{self.prefix}:{{w}}:apikeys"

    def api_key(self, key_id: str) -> str:
        return f"{self.prefix}:{{w}}:apikey:{key_id}"

    def api_key_secret(self, digest: str) -> str:
        return f"{self.prefix}:{{w}}:apikey-secret:{digest}"

    @property
    def api_keys_revoked(self) -> str:
        return f"{self.prefix}:{{w}}:apikeys-revoked"

    @property
    def agents(self) -> str:
        return f"{self.prefix}:{{w}}:agents"

    def agent(self, agent_id: str) -> str:
        return f"{self.prefix}:{{w}}:agent:{agent_id}"

    def agent_versions(self, agent_id: str) -> str:
        return f"{self.prefix}:{{w}}:agent:{agent_id}:versions"

    def agent_sessions(self, agent_id: str) -> str:
        return f"{self.prefix}:{{w}}:agent:{agent_id}:sessions"

    def version(self, version_id: str) -> str:
        return f"{self.prefix}:{{w}}:version:{version_id}"

    @property
    def providers(self) -> str:
        return f"{self.prefix}:{{w}}:providers"

    def provider(self, provider_id: str) -> str:
        return f"{self.prefix}:{{w}}:provider:{provider_id}"

    def platform_offer(self, provider_id: str) -> str:
        """Set while a live worker holds the deployment's key for this platform provider."""
        return f"{self.prefix}:{{w}}:platform:{provider_id}"

    @property
    def sessions(self) -> str:
        return f"{self.prefix}:{{w}}:sessions"

    def workspace_idempotency(self, digest: str) -> str:
        return f"{self.prefix}:{{w}}:idem:{digest}"

    @property
    def timers_armed(self) -> str:
        """Set once every session has its retention and trim timers (broker/services/retention.py)."""
        return f"{self.prefix}:{{w}}:timers-armed"

    @property
    def keepers(self) -> str:
        """The live workers, scored by the end of their lease (keepers.lua)."""
        return f"{self.prefix}:{{w}}:keepers"

    def worker_health(self, host: str) -> str:
        return f"{self.prefix}:{{w}}:health:{host}"

    # The inbox (broker/services/inbox.py).
    @property
    def inbox_items(self) -> str:
        """Every open inbox item's JSON, by `<session id>|<call id>`."""
        return f"{self.prefix}:{{w}}:inbox:items"

    def inbox_index(self, kind: str | None = None, agent_id: str | None = None, subject: str | None = None) -> str:
        """The open items matching this combination of filters (None: any). The subject, which may hold
        any character, comes last, after parts that hold no colon, so no two combinations share a name."""
        name = f"{self.prefix}:{{w}}:inbox:ix"
        if kind is not None:
            name += f":k:{kind}"
        if agent_id is not None:
            name += f":a:{agent_id}"
        if subject is not None:
            name += f":u:{subject}"
        return name

    def inbox_session(self, session_id: str) -> str:
        """The seq of the last notice applied to each of a session's calls, and `~gone` once deleted."""
        return f"{self.prefix}:{{w}}:inbox:s:{session_id}"

    # MCP grants' OAuth connections.
    def mcp_connection(self, connection_id: str) -> str:
        return f"{self.prefix}:{{w}}:mcp:connection:{connection_id}"

    def mcp_authorization(self, state_digest: str) -> str:
        """A pending sign-in, by the SHA-256 of its state (the state itself is never stored)."""
        return f"{self.prefix}:{{w}}:mcp:authorization:{state_digest}"

    def mcp_connections(self, owner: str) -> str:
        """An owner's connection ids; the owner (`u:<subject>`, any character) comes last."""
        return f"{self.prefix}:{{w}}:mcp:connections:{owner}"

    def mcp_challenge(self, session_id: str, grant: str) -> str:
        """What a grant's server last challenged a session's requests with, for its next sign-in; the grant
        name (any character) comes last."""
        return f"{self.prefix}:{{w}}:mcp:challenge:{session_id}:{grant}"

    # Webhooks.
    @property
    def webhooks(self) -> str:
        return f"{self.prefix}:{{w}}:webhooks"

    def webhook(self, endpoint_id: str) -> WebhookKeys:
        return WebhookKeys(f"{self.prefix}:{{w}}:webhook:{endpoint_id}", endpoint_id)

    @property
    def webhooks_due(self) -> str:
        """Endpoint ids by when one of their deliveries is next to be sent."""
        return f"{self.prefix}:{{w}}:webhooks-due"

    def webhooks_for(self, event_type: str) -> str:
        """Endpoint ids subscribed to one webhook event type."""
        return f"{self.prefix}:{{w}}:webhooks-for:{event_type}"

    # Partitions and sessions.
    def partition(self, number: int) -> PartitionKeys:
        return PartitionKeys(f"{self.prefix}:{{{tag(number)}}}", number)

    def partitions(self) -> list[PartitionKeys]:
        return [self.partition(number) for number in range(PARTITIONS)]

    def session(self, session_id: str) -> SessionKeys:
        keys = self._sessions.get(session_id)
        if keys is None:
            if len(self._sessions) >= _SESSIONS_KEPT:
                self._sessions.clear()
            partition = self.partition(partition_of(session_id))
            keys = self._sessions[session_id] = SessionKeys(f"{partition.base}:s:{session_id}", session_id, partition)
        return keys

    @property
    def alarm_pattern(self) -> str:
        """The channels of every partition's alarm (PSUBSCRIBE; braces are plain characters in a glob)."""
        return f"{self.prefix}:{{*}}:alarm"

    def partition_of_alarm(self, channel: str) -> int | None:
        """The partition whose alarm channel this is, or None."""
        head, tail = f"{self.prefix}:{{", "}:alarm"
        if not (channel.startswith(head) and channel.endswith(tail)):
            return None
        return partition_of_tag(channel[len(head) : -len(tail)])

    @property
    def hub_control(self) -> str:
        """A channel nothing publishes on: each process's live hub holds it to keep its connection."""
        return f"{self.prefix}:hub"

    # Members of the partition indexes.
    @staticmethod
    def member(session_id: str, rest: str) -> str:
        return f"{session_id}:{rest}"

    @staticmethod
    def split_member(member: str) -> tuple[str, str]:
        return member[:_UUID_LEN], member[_UUID_LEN + 1 :]

    @staticmethod
    def sign_in_deadline(session_id: str, authorization_id: str) -> str:
        """The deadlines index's member of a sign-in a step waits on: a call's member with its id after
        SIGN_IN_DEADLINE (a call whose id looks so is told apart by the session's sign-ins)."""
        return f"{session_id}:{SIGN_IN_DEADLINE}{authorization_id}"
