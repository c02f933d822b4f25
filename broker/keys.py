"""Every Redis key and channel name Switchboard uses, built in this one place.

All names start with the deployment prefix (`sb` unless `SWITCHBOARD_KEY_PREFIX` says otherwise; never
`arq`, which arq owns). Workspace keys carry the hash tag `{w}`; session keys carry the session id as a hash
tag, `{<session id>}`, so all of one session's keys sit in one Cluster slot. Redis Cluster is not supported
yet: the scripts that touch a session also touch the global timer indexes (`deadlines`, `leases`, `work`,
`steps`), the figures (`stats`) and, at create and delete, the workspace indexes, and those live in other
slots.

| key                                   | type   | TTL                      | owner / written by                     |
| ------------------------------------- | ------ | ------------------------ | -------------------------------------- |
| `sb:{w}:workspace`                    | string | none                     | API start: the workspace id (SET NX)   |
| `sb:{w}:apikeys`                      | zset   | none                     | key ids, lex-ordered (UUIDv7)          |
| `sb:{w}:apikey:<id>`                  | hash   | none                     | one API key's record                   |
| `sb:{w}:apikey-secret:<sha256>`       | string | none                     | secret hash -> key id (auth lookup)    |
| `sb:{w}:agents`                       | zset   | none                     | agent ids                              |
| `sb:{w}:agent:<id>`                   | hash   | none                     | agent record, live version, security   |
| `sb:{w}:agent:<id>:versions`          | zset   | none                     | version ids of one agent               |
| `sb:{w}:agent:<id>:sessions`          | set    | none                     | session ids of one agent (delete)      |
| `sb:{w}:version:<id>`                 | string | none                     | one published version (JSON)           |
| `sb:{w}:providers`                    | zset   | none                     | BYOK model provider ids                |
| `sb:{w}:provider:<id>`                | hash   | none                     | BYOK provider record (holds its key)   |
| `sb:{w}:sessions`                     | zset   | none                     | session ids                            |
| `sb:{w}:idem:<digest>`                | string | idempotency TTL          | receipts of workspace routes           |
| `sb:{S}:meta`                         | hash   | token TTL once deleted   | session record, event seq, tombstone   |
| `sb:{S}:events`                       | stream | none                     | the event log, ids `<seq>-0`           |
| `sb:{S}:tokens`                       | hash   | token TTL once deleted   | token hash -> {id, expires}            |
| `sb:{S}:names`                        | hash   | none                     | active client name -> client id        |
| `sb:{S}:clients`                      | set    | none                     | every client id ever (purge)           |
| `sb:{S}:client:<cid>`                 | hash   | none                     | one registration                       |
| `sb:{S}:client:<cid>:lease`           | string | the client's ttl         | lapses the registration when it expires|
| `sb:{S}:client:<cid>:calls`           | stream | none (trimmed by age)    | calls for the registration's pool;     |
|                                       |        |                          | group `pool`, a consumer per member    |
| `sb:{S}:calls`                        | hash   | none                     | call id -> call record (JSON)          |
| `sb:{S}:owed`                         | hash   | none                     | unsettled call id -> client id         |
| `sb:{S}:dl:<call id>`                 | string | the call's deadline      | fires the deadline when it expires     |
| `sb:{S}:run`                          | hash   | none                     | the active run's state                 |
| `sb:{S}:inbox`                        | list   | none                     | steering input for the active run      |
| `sb:{S}:queue`                        | list   | none                     | input waiting for a run of its own     |
| `sb:{S}:idem:<digest>`                | string | idempotency TTL          | receipts of session routes             |
| `sb:deadlines`                        | zset   | none                     | `<sid>:<call id>` by due time (ms)     |
| `sb:leases`                           | zset   | none                     | `<sid>:<cid>` by lapse time (ms)       |
| `sb:work`                             | zset   | none                     | work owed by a script's caller (below) |
| `sb:steps`                            | zset   | none                     | `<sid>` by its running step's lease    |
| `sb:dequeue`                          | zset   | none                     | `<sid>` by its debounce timer          |
| `sb:purge`                            | zset   | none                     | deleted session ids left to purge      |
| `sb:stats`                            | hash   | none                     | deployment figures: the last key of    |
|                                       |        |                          | every script including lib/core.lua    |
| `sb:arq:queue`                        | zset   | none                     | arq's queue (arq writes it)            |
| `sb:arq:health:<host>`                | string | health interval + 1 s    | arq's health check of a host's worker  |
| `sb:arq:wake`                         | list   | none (capped length)     | a token per enqueued job; idle workers |
|                                       |        |                          | BLPOP it rather than wait out a poll   |

Members of `sb:work`: `s|<sid>|<run>|<step>|<attempt>` (a step job), `t|<sid>|<call>` (a server tool job),
`d|<sid>|<client>` (a run-scoped client to release). Deadlines in `sb:deadlines` are client calls' ack and
result deadlines and server calls' leases.

Channels (pub/sub, not keys): `sb:{S}:live` carries every appended event of a session as its JSON, and
the text `deleted` when the session is deleted. `sb:hub` is subscribed by every API process and never
published on.

Owned by arq: `arq:job:<job id>`, `arq:result:<job id>`, `arq:in-progress:<job id>`, `arq:retry:<job id>`,
`arq:abort`. Besides arq, `enqueue_job.lua` writes `arq:job:<job id>`, exactly as arq's `enqueue_job` does
(arq is pinned), and `renew_step.lua` / `renew_call.lua` extend `arq:in-progress:<job id>`, arq's claim on
a job it took: the worker sets the claim to a lease (not arq's job timeout), and renews it with the
step's or the call's lease, so a job taken by a worker that died before beginning it is taken again
after one lease. Job ids start with the prefix (`sb:step:<run>:<step>:<attempt>`,
`sb:tool:<sid>:<call>`).
"""

from __future__ import annotations

from dataclasses import dataclass

from arq.constants import in_progress_key_prefix, job_key_prefix, result_key_prefix

# The consumer group on a registration's call stream; each pool member is a consumer of it.
POOL_GROUP = "pool"

# A session id is a canonical UUID, so members of the global indexes split at a fixed offset.
_UUID_LEN = 36


@dataclass(frozen=True, slots=True)
class SessionKeys:
    """The keys of one session; every name carries the session id as a hash tag."""

    base: str
    session_id: str

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
    def live(self) -> str:
        """The pub/sub channel of the session's appended events."""
        return f"{self.base}:live"

    def client(self, client_id: str) -> str:
        return f"{self.base}:client:{client_id}"

    def lease(self, client_id: str) -> str:
        return f"{self.base}:client:{client_id}:lease"

    def client_calls(self, client_id: str) -> str:
        return f"{self.base}:client:{client_id}:calls"

    def deadline(self, call_id: str) -> str:
        return f"{self.base}:dl:{call_id}"

    def idempotency(self, digest: str) -> str:
        return f"{self.base}:idem:{digest}"


@dataclass(frozen=True, slots=True)
class KeySpace:
    """Builds every key name from the deployment prefix."""

    prefix: str = "sb"

    # Workspace.
    @property
    def workspace(self) -> str:
        return f"{self.prefix}:{{w}}:workspace"

    @property
    def api_keys(self) -> str:
        return f"{self.prefix}:{{w}}:apikeys"

    def api_key(self, key_id: str) -> str:
        return f"{self.prefix}:{{w}}:apikey:{key_id}"

    def api_key_secret(self, digest: str) -> str:
        return f"{self.prefix}:{{w}}:apikey-secret:{digest}"

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

    @property
    def sessions(self) -> str:
        return f"{self.prefix}:{{w}}:sessions"

    def workspace_idempotency(self, digest: str) -> str:
        return f"{self.prefix}:{{w}}:idem:{digest}"

    # Sessions.
    def session(self, session_id: str) -> SessionKeys:
        return SessionKeys(f"{self.prefix}:{{{session_id}}}", session_id)

    # Global timer indexes.
    @property
    def deadlines(self) -> str:
        return f"{self.prefix}:deadlines"

    @property
    def leases(self) -> str:
        return f"{self.prefix}:leases"

    @property
    def work(self) -> str:
        return f"{self.prefix}:work"

    @property
    def steps(self) -> str:
        return f"{self.prefix}:steps"

    @property
    def dequeue(self) -> str:
        return f"{self.prefix}:dequeue"

    @property
    def purges(self) -> str:
        return f"{self.prefix}:purge"

    @property
    def stats(self) -> str:
        """The deployment's call, client and run figures (lib/core.lua), read by /metrics/cluster."""
        return f"{self.prefix}:stats"

    @property
    def hub_control(self) -> str:
        """A channel nothing publishes on: each process's live hub holds it to keep its connection."""
        return f"{self.prefix}:hub"

    # arq.
    @property
    def queue(self) -> str:
        return f"{self.prefix}:arq:queue"

    def worker_health(self, host: str) -> str:
        return f"{self.prefix}:arq:health:{host}"

    @property
    def wake(self) -> str:
        return f"{self.prefix}:arq:wake"

    @staticmethod
    def arq_job(job_id: str) -> str:
        return job_key_prefix + job_id

    @staticmethod
    def arq_result(job_id: str) -> str:
        return result_key_prefix + job_id

    @staticmethod
    def arq_claim(job_id: str) -> str:
        return in_progress_key_prefix + job_id

    def step_job_id(self, run_id: str, step: int, attempt: int) -> str:
        return f"{self.prefix}:step:{run_id}:{step}:{attempt}"

    def tool_job_id(self, session_id: str, call_id: str) -> str:
        return f"{self.prefix}:tool:{session_id}:{call_id}"

    # Members of the global indexes, and the names that expiry notifications carry.
    @staticmethod
    def member(session_id: str, rest: str) -> str:
        return f"{session_id}:{rest}"

    @staticmethod
    def split_member(member: str) -> tuple[str, str]:
        return member[:_UUID_LEN], member[_UUID_LEN + 1 :]

    def parse_expired(self, key: str) -> tuple[str, str, str] | None:
        """Read an expired key's name: `("deadline", sid, call_id)`, `("lease", sid, cid)`, or None."""
        head = f"{self.prefix}:{{"
        if not key.startswith(head):
            return None
        session_id = key[len(head) : len(head) + _UUID_LEN]
        rest = key[len(head) + _UUID_LEN :]
        if rest.startswith("}:dl:"):
            return "deadline", session_id, rest[len("}:dl:") :]
        if rest.startswith("}:client:") and rest.endswith(":lease"):
            return "lease", session_id, rest[len("}:client:") : -len(":lease")]
        return None
