-- Adds a session token (tokens already issued stay live) and drops the ones that have expired.
--
--!key meta        the session's record
--!key tokens      its tokens
--!arg sid         the session id
--!arg token_hash  token hash
--!arg token       token record JSON ({"id", "expires_at" ms})
--
-- Returns {'ok'}; refusal not_found no session.

--!include lib/core.lua

local S = {meta = K.meta, sid = A.sid, now = sb_now_ms()}
if not sb_session_live(S) then return sb_refuse('not_found', 'no_session', S.sid) end
local tokens = redis.call('HGETALL', K.tokens)
for i = 1, #tokens, 2 do
  if cjson.decode(tokens[i + 1]).expires_at <= S.now then redis.call('HDEL', K.tokens, tokens[i]) end
end
redis.call('HSET', K.tokens, A.token_hash, A.token)
return sb_reply()
