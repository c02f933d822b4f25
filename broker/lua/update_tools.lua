-- Replaces the whole tool set of an active registration and appends `client_tools_updated`.
--
-- KEYS[1] meta  KEYS[2] events  KEYS[3] client
-- ARGV[1] channel  ARGV[2] client id  ARGV[3] tools JSON  ARGV[4] tool names joined by "\n"
-- Returns {0, event JSON}; {404, msg} when the session or an active registration is missing.

--!include lib/core.lua

local S = {meta = KEYS[1], events = KEYS[2], channel = ARGV[1], now = sb_now_ms()}
if not sb_session_live(S) then return sb_refuse(404, 'session') end
if redis.call('HGET', KEYS[3], 'state') ~= 'active' then return sb_refuse(404, 'client') end
redis.call('HSET', KEYS[3], 'tools', ARGV[3], 'tool_names', ARGV[4])
local event = sb_append(S, '{"type":"client_tools_updated","client_id":' .. sb_str(ARGV[2])
  .. ',"tools":' .. ARGV[3] .. '}')
return sb_reply(event)
