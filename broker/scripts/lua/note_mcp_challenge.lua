-- Keeps what a grant's server challenged a session's requests with (its `WWW-Authenticate`), for the
-- grant's next sign-in in the session, and counts the step-ups it asked for (a 403 insufficient_scope):
-- past `limit` of them within the record's life no more are noted, so a server that never takes what it
-- asked for does not have the person sign in again and again. The record lives `ttl_ms` from its first
-- note (the sign-in's wait), its count with it.
--
--!key challenge   the session's record for the grant (hash: header, granted, step_ups, pending)
--!arg header      the challenge, as sent (bounded by the caller)
--!arg granted     the scope the refused token had ('' when none is known)
--!arg step_up     '1' for a step-up (counted against `limit`), '0' for a refused token
--!arg limit       step-ups allowed within the record's life
--!arg ttl_ms      the record's life
--
-- Returns {'ok', 'noted'} or {'ok', 'exhausted'} (a step-up past the limit: nothing noted).

--!include lib/core.lua

local step_ups = tonumber(redis.call('HGET', K.challenge, 'step_ups') or '0')
if A.step_up == '1' then
  if step_ups >= tonumber(A.limit) then
    return sb_reply('exhausted')
  end
  step_ups = step_ups + 1
end
redis.call('HSET', K.challenge, 'header', A.header, 'granted', A.granted, 'step_ups', step_ups)
if A.step_up == '1' then
  redis.call('HSET', K.challenge, 'pending', '1')
end
if redis.call('PTTL', K.challenge) < 0 then
  redis.call('PEXPIRE', K.challenge, A.ttl_ms)
end
return sb_reply('noted')
