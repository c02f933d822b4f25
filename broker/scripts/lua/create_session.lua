-- Creates a session on an agent's live version: its record, its first token and `session_created`, all
-- at once. The workspace's indexes (another slot) are the caller's: it writes them before this script,
-- and readers of those indexes skip an id whose session does not exist.
--
--!key meta          the session's record
--!key events        its event log
--!key tokens        its tokens
--!arg channel       its live channel
--!arg sid           session id
--!arg agent_id      agent id
--!arg version_id    version id
--!arg display_name  display name
--!arg created_by    created_by: `api_key:<key id>`, or JSON for another creator (sessions.py _stored_creator)
--!arg created_by_label  an API key creator's label ('' for none)
--!arg workspace_id  workspace id
--!arg token_hash    token hash
--!arg token         token record (credentials.py token_record)
--!arg policy        message concurrency policy
--!arg debounce_ms   debounce ms (the version's, fixed for the session's life)
--!arg retention_ms  retention ms (0: kept for ever): when the session's retention is first checked
--                   (retain_session.lua, through the partition's purge index, member `r|<session id>`)
--!arg settled_ms    settled-call retention ms (0: none): when its settled calls are first trimmed
--                   (trim_calls.lua, member `c|<session id>`)
--!arg subject       the operator's id for the session's end user ('' for none)
--
-- Returns {'ok', 'created' | 'exists', created_at ms}.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua

local S = {meta = K.meta, events = K.events, channel = A.channel, now = sb_now_ms()}
local existing = redis.call('HGET', S.meta, 'created_at')
if existing then return sb_reply('exists', tonumber(existing)) end
redis.call('HSET', S.meta, 'id', A.sid, 'agent_id', A.agent_id, 'agent_version_id', A.version_id,
  'display_name', A.display_name, 'created_by', A.created_by, 'workspace_id', A.workspace_id,
  'created_at', S.now, 'seq', 0, 'policy', A.policy, 'debounce_ms', A.debounce_ms)
if A.subject ~= '' then redis.call('HSET', S.meta, 'subject', A.subject) end
if A.created_by_label ~= '' then redis.call('HSET', S.meta, 'created_by_label', A.created_by_label) end
redis.call('HSET', K.tokens, A.token_hash, A.token)
local retention = tonumber(A.retention_ms)
if retention > 0 then sb_timer(SB_P.purges, S.now + retention, 'r|' .. A.sid) end
local settled = tonumber(A.settled_ms)
if settled > 0 then sb_timer(SB_P.purges, S.now + settled, 'c|' .. A.sid) end
sb_append(S, sb_ev_session_created(A.agent_id, A.version_id))
return sb_reply('created', S.now)
