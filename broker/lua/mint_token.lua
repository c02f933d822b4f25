-- Adds a session token (tokens already issued stay live) and drops the ones that have expired.
--
-- KEYS[1] meta  KEYS[2] tokens
-- ARGV[1] token hash  ARGV[2] token record JSON ({"id", "expires_at" ms})
-- Returns {0}; {404, msg} no session.

--!include lib/core.lua

local S = {meta = KEYS[1], now = sb_now_ms()}
if not sb_session_live(S) then return sb_refuse(404, 'session') end
local tokens = redis.call('HGETALL', KEYS[2])
for i = 1, #tokens, 2 do
  if cjson.decode(tokens[i + 1]).expires_at <= S.now then redis.call('HDEL', KEYS[2], tokens[i]) end
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return sb_reply()
