-- Replaces the whole tool set of an active registration and appends `client_tools_updated`. A call it owes
-- of a tool it no longer offers, declared on_leave 'wait', waits for its client (lib/calls.lua sb_park:
-- another registration of the name, or this one offering the tool again); one of another tool goes on
-- as before. When the registration holds its name, the calls waiting for that name whose tool it now
-- offers are dispatched to it (lib/waiting.lua).
--
--!layout lib/client.lua
--!arg tools         the tools JSON
--!arg tool_names    the tool names joined by "\n"
--!arg ack_ms        ack deadline (ms)
--!arg retention_ms  call stream retention (ms)
--!arg result_ms     the deployment's result deadline (ms): how long a waiting call without a timeout_s of
--                   its own waits, from its first dispatch
--!arg group         the pool's consumer group
-- Returns {'ok', event JSON}; refusal not_found when the session or an active registration is missing; refusal conflict
-- the session's storage is full (SWITCHBOARD_MAX_SESSION_BYTES).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/call.lua
--!include lib/client.lua
--!include lib/waiting.lua

local S = sb_client_context()
S.result_ms = tonumber(A.result_ms)
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local client = redis.call('HMGET', S.client, 'state', 'bt', 'bl', 'name', 'tool_names')
if client[1] ~= 'active' then return sb_refuse('not_found', 'no_client', S.cid) end
local old, bt = tonumber(client[2]) or 0, sb_tools_bytes(A.tools, A.tool_names)
local name, offered = client[4], '\n' .. A.tool_names .. '\n'
local dropped = false
for tool in string.gmatch(client[5] or '', '[^\n]+') do
  if not string.find(offered, '\n' .. tool .. '\n', 1, true) then dropped = true end
end
-- The calls that will wait for their client, read only when a tool went: a PUT that adds or keeps tools
-- costs nothing here. Each id is followed by its record.
local parking, ended = {}, 0
if dropped then
  local owed = redis.call('HGETALL', S.owed)
  for i = 1, #owed, 2 do
    local raw = owed[i + 1] == S.cid and redis.call('HGET', S.calls, owed[i])
    local rec = raw and sb_read_call(S.calls, owed[i], raw)
    if rec and rec.client == S.cid and rec.ol and (rec.state == 'dispatched' or rec.state == 'acked')
      and not string.find(offered, '\n' .. rec.tool .. '\n', 1, true) then
      parking[#parking + 1] = owed[i]
      parking[#parking + 1] = rec
      ended = ended + sb_end_inputs_bytes(owed[i], rec)
    end
  end
end
-- The tools are stored twice (the registration and the event), and a parked call's open input requests
-- end with input_provided each.
local full = sb_room(S.meta, S.now, bt - old + #A.tools + 2 * SB_ENTRY + ended, SB_P.cap)
if full then return full end
redis.call('HSET', S.client, 'tools', A.tools, 'tool_names', A.tool_names, 'bt', bt,
  'bl', (tonumber(client[3]) or 0) + bt - old)
sb_add(S.meta, bt - old)
local event = sb_append(S, sb_ev_client_tools_updated(S.cid, A.tools))

for i = 1, #parking, 2 do
  local rec = parking[i + 1]
  sb_park(S, parking[i], rec, name, 'the client stopped offering ' .. rec.tool .. ' before answering',
    {S.client_calls, A.group})
end
if name and redis.call('HGET', S.names, name) == S.cid then
  sb_take_waiting(S, name, S.cid, S.client, S.client_calls, tonumber(A.ack_ms), tonumber(A.retention_ms))
end
return sb_reply(event)
