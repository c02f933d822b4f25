-- Registers a client under the smallest free name (`web`, `web-2`, ...) among the session's active ones.
--
--!key meta         the session's record
--!key events       its event log
--!key names        its registrations by name
--!key clients      its registrations' ids
--!key client       the registration
--!arg channel      the session's live channel
--!arg sid          the session id
--!arg cid          the client id
--!arg name         the requested name
--!arg lifetime     the lifetime JSON
--!arg ttl_ms       the lease (ms; 0 for never)
--!arg tools        the tools JSON
--!arg tool_names   the tool names joined by "\n"
--!arg max_clients  most active clients
--!arg max_len      longest name
-- Returns {'ok', assigned name, expires ms or -1}; refusals: not_found, invalid_request (too many
-- clients), conflict (the session's storage is full: SWITCHBOARD_MAX_SESSION_BYTES).
-- A client id that is already registered answers with what it was given (a retried request).

--!include lib/core.lua
--!include lib/partition.lua
--!include lib/client.lua

local S = {meta = K.meta, events = K.events, channel = A.channel, sid = A.sid, now = sb_now_ms()}
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local assigned, expires = sb_register(S, {
  names = K.names, clients = K.clients, client = K.client, cid = A.cid,
  name = A.name, lifetime = A.lifetime, ttl = tonumber(A.ttl_ms), tools = A.tools, tool_names = A.tool_names,
  max_clients = tonumber(A.max_clients), max_len = tonumber(A.max_len), run = '',
})
if not assigned then return expires end
return sb_reply(assigned, expires)
