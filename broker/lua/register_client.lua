-- Registers a client under the smallest free name (`web`, `web-2`, ...) among the session's active ones.
--
-- KEYS[1] meta  KEYS[2] events  KEYS[3] names  KEYS[4] clients  KEYS[5] client (and the partition's
-- keys last, lib/partition.lua)
-- ARGV[1] channel  ARGV[2] session id  ARGV[3] client id  ARGV[4] requested name  ARGV[5] lifetime JSON
-- ARGV[6] ttl ms (0 for never)  ARGV[7] tools JSON  ARGV[8] tool names joined by "\n"
-- ARGV[9] max active clients  ARGV[10] max name length
-- Returns {0, assigned name, expires ms or -1}; {404, 'session'}; {400, msg} too many clients; {409, msg}
-- the session's storage is full (SWITCHBOARD_MAX_SESSION_BYTES).
-- A client id that is already registered answers with what it was given (a retried request).

--!include lib/core.lua
--!include lib/partition.lua
--!include lib/client.lua

local S = {meta = KEYS[1], events = KEYS[2], channel = ARGV[1], sid = ARGV[2], now = sb_now_ms()}
if not sb_session_live(S) then return sb_refuse(404, 'session') end
local assigned, expires, status = sb_register(S, {
  names = KEYS[3], clients = KEYS[4], client = KEYS[5], cid = ARGV[3],
  name = ARGV[4], lifetime = ARGV[5], ttl = tonumber(ARGV[6]), tools = ARGV[7], tool_names = ARGV[8],
  max_clients = tonumber(ARGV[9]), max_len = tonumber(ARGV[10]), run = '',
})
if not assigned then return sb_refuse(status, expires) end
return sb_reply(assigned, expires)
