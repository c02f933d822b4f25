-- Replaces the whole tool set of an active registration and appends `client_tools_updated`.
--
-- KEYS[1] meta  KEYS[2] events  KEYS[3] client (and the partition's keys last, lib/partition.lua)
-- ARGV[1] channel  ARGV[2] client id  ARGV[3] tools JSON  ARGV[4] tool names joined by "\n"
-- Returns {0, event JSON}; {404, msg} when the session or an active registration is missing; {409, msg}
-- the session's storage is full (SWITCHBOARD_MAX_SESSION_BYTES).

--!include lib/core.lua
--!include lib/partition.lua
--!include lib/client.lua

local S = {meta = KEYS[1], events = KEYS[2], channel = ARGV[1], now = sb_now_ms()}
if not sb_session_live(S) then return sb_refuse(404, 'session') end
local client = redis.call('HMGET', KEYS[3], 'state', 'bt', 'bl')
if client[1] ~= 'active' then return sb_refuse(404, 'client') end
local old, bt = tonumber(client[2]) or 0, sb_tools_bytes(ARGV[3], ARGV[4])
-- The tools are stored twice: the registration and the event.
local full = sb_room(S.meta, S.now, bt - old + #ARGV[3] + 2 * SB_ENTRY, SB_P.cap)
if full then return sb_refuse(409, full) end
redis.call('HSET', KEYS[3], 'tools', ARGV[3], 'tool_names', ARGV[4], 'bt', bt,
  'bl', (tonumber(client[3]) or 0) + bt - old)
sb_add(S.meta, bt - old)
local event = sb_append(S, '{"type":"client_tools_updated","client_id":' .. sb_str(ARGV[2])
  .. ',"tools":' .. ARGV[3] .. '}')
return sb_reply(event)
