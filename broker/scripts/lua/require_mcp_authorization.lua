-- Asks the session's person to sign in to an OAuth grant's server: the sign-in's record, the grant's
-- latest sign-in pointing at it, and `mcp_authorization_required`. A grant whose latest sign-in still
-- waits, or was declined, is not asked again: its record is left as it is (the state the caller drew for
-- this one simply lapses unused).
--
--!layout lib/run.lua   (run_id is '')
--!key authorizations    the session's MCP sign-ins
--!arg authorization_id  the new sign-in's id
--!arg grant             the grant's name
--!arg server_url        the grant's server
--!arg url               the authorization URL the person opens
--!arg expires_at        when the sign-in runs out (ms)
--
-- Returns {'ok', 'asked', event JSON} or {'ok', 'waiting' | 'declined', the latest sign-in's id};
-- refusal not_found (no session), conflict session_full.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua

local S = sb_run_context()
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local latest = redis.call('HGET', K.authorizations, 'g:' .. A.grant)
if latest then
  local raw = redis.call('HGET', K.authorizations, latest)
  if raw then
    local rec = cjson.decode(raw)
    if rec.state == 'declined' then return sb_reply('declined', latest) end
    if rec.state == 'pending' and tonumber(rec.expires_at) > S.now then return sb_reply('waiting', latest) end
  end
end
local body = sb_ev_mcp_authorization_required(A.authorization_id, A.grant, A.server_url, A.url,
  sb_iso(tonumber(A.expires_at) * 1000))
local full = sb_room(S.meta, S.now, 2 * #body + SB_ENTRY + 256, SB_P.cap)
if full then return full end
-- `server` for the event that ends it unsigned; `run`, the run that asked, for its notice (inbox, webhook).
local rec = {grant = A.grant, server = A.server_url, state = 'pending', expires_at = tonumber(A.expires_at),
  run = redis.call('HGET', S.run, 'run_id') or nil}
redis.call('HSET', K.authorizations, A.authorization_id, cjson.encode(rec), 'g:' .. A.grant, A.authorization_id)
local json = sb_append(S, body)
return sb_reply('asked', json)
