-- Registers a client under the smallest free name (`web`, `web-2`, ...) among the session's active ones,
-- with its Idempotency-Key's receipt checked and kept in the same step (lib/hot.lua): a repeated key
-- answers what the first request was answered and registers nothing. One script where there were three
-- (claim the key, register, settle the key) and no attempt ever holds a key half done. A registration
-- given the name it asked for is dispatched the calls waiting for that name whose tools it offers
-- (lib/waiting.lua); one given another name (`web-2`) is not.
--
--!layout lib/hot.lua   (token '': the route's caller was checked before)
--!key meta         the session's record
--!key events       its event log
--!key names        its registrations by name
--!key clients      its registrations' ids
--!key client       the registration
--!key calls        the session's call records
--!key owed         the calls still owed an answer
--!key stream       the registration's call stream
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
--!arg ack_ms       ack deadline (ms) of a waiting call dispatched to it
--!arg retention_ms call stream retention (ms)
-- Returns {'ok', the answer's body: {"id", "name", "expires_at"} (RegisteredClientBody's JSON)};
-- refusals: not_found, invalid_request (too many clients), conflict (`key_reused`; `key_in_flight`: an
-- earlier release's attempt holds the key; the session's storage is full: SWITCHBOARD_MAX_SESSION_BYTES).
-- A client id that is already registered answers with what it was given.

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/call.lua
--!include lib/client.lua
--!include lib/waiting.lua
--!include lib/hot.lua

local S = {meta = K.meta, events = K.events, calls = K.calls, owed = K.owed, channel = A.channel, sid = A.sid,
  now = sb_now_ms()}
local H = sb_hot_context()
local early = sb_hot_begin(S, H)
if early then return early end
-- The receipt's room (the answer is about 120 bytes), before anything is written.
local full = sb_hot_receipt_room(S, H, 256)
if full then return full end
local assigned, expires = sb_register(S, {
  names = K.names, clients = K.clients, client = K.client, cid = A.cid,
  name = A.name, lifetime = A.lifetime, ttl = tonumber(A.ttl_ms), tools = A.tools, tool_names = A.tool_names,
  max_clients = tonumber(A.max_clients), max_len = tonumber(A.max_len), run = '',
})
if not assigned then return sb_hot_keep(S, H, expires) end
if redis.call('HGET', K.names, A.name) == A.cid then
  sb_take_waiting(S, A.name, A.cid, K.client, K.stream, tonumber(A.ack_ms), tonumber(A.retention_ms))
end
-- As pydantic writes it: the id as given (a canonical UUID), the moment as sb_iso writes every event's.
return sb_hot_reply(S, H, '{"id":"' .. A.cid .. '","name":' .. sb_str(assigned) .. ',"expires_at":'
  .. (expires < 0 and 'null' or ('"' .. sb_iso(expires * 1000) .. '"')) .. '}')
