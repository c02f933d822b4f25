-- Replaces the whole tool set of an active registration and appends `client_tools_updated`.
--
--!key meta        the session's record
--!key events      its event log
--!key client      the registration
--!arg channel     the session's live channel
--!arg sid         the session id
--!arg cid         the client id
--!arg tools       the tools JSON
--!arg tool_names  the tool names joined by "\n"
-- Returns {'ok', event JSON}; refusal not_found when the session or an active registration is missing; refusal conflict
-- the session's storage is full (SWITCHBOARD_MAX_SESSION_BYTES).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/client.lua

local S = {meta = K.meta, events = K.events, channel = A.channel, sid = A.sid, now = sb_now_ms()}
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local client = redis.call('HMGET', K.client, 'state', 'bt', 'bl')
if client[1] ~= 'active' then return sb_refuse('not_found', 'no_client', A.cid) end
local old, bt = tonumber(client[2]) or 0, sb_tools_bytes(A.tools, A.tool_names)
-- The tools are stored twice: the registration and the event.
local full = sb_room(S.meta, S.now, bt - old + #A.tools + 2 * SB_ENTRY, SB_P.cap)
if full then return full end
redis.call('HSET', K.client, 'tools', A.tools, 'tool_names', A.tool_names, 'bt', bt,
  'bl', (tonumber(client[3]) or 0) + bt - old)
sb_add(S.meta, bt - old)
local event = sb_append(S, sb_ev_client_tools_updated(A.cid, A.tools))
return sb_reply(event)
