-- Adds a session token (tokens already issued stay live) and drops the ones that have expired.
--
--!key meta        the session's record
--!key tokens      its tokens
--!arg sid         the session id
--!arg token_hash  token hash
--!arg token       token record (`<expires_at ms> <id>`: credentials.py token_record)
--
-- Returns {'ok'}; refusal not_found no session.

--!include lib/core.lua

local S = {meta = K.meta, sid = A.sid, now = sb_now_ms()}
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local tokens = redis.call('HGETALL', K.tokens)
for i = 1, #tokens, 2 do
  -- Records written before token_record hold JSON.
  local raw = tokens[i + 1]
  local expires = tonumber(string.match(raw, '^(%d+) ') or string.match(raw, '"expires_at":(%d+)'))
  if expires <= S.now then redis.call('HDEL', K.tokens, tokens[i]) end
end
redis.call('HSET', K.tokens, A.token_hash, A.token)
return sb_reply()
