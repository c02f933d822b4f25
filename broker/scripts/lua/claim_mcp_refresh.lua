-- Claims an MCP grant's OAuth connection for one refresh of its tokens, so one worker at a time sends
-- its refresh token (a server that rotates refresh tokens takes each once: a second refresh of the same
-- one would be refused and the person asked again for nothing). A claim runs out after `hold_ms`, so a
-- worker that died while refreshing holds no connection for longer.
--
--!key connection  the connection's hash
--!arg claim       the claimant's random token
--!arg hold_ms     how long the claim holds at most
--
-- Returns {'ok', 'claimed'}, {'ok', 'busy'} (another claim holds) or {'ok', 'gone'} (no connection).

--!include lib/core.lua

if redis.call('EXISTS', K.connection) == 0 then
  return sb_reply('gone')
end
local now = sb_now_ms()
local held = redis.call('HGET', K.connection, 'refreshing')
if held then
  local until_ms = tonumber(string.match(held, '|(%d+)$'))
  if until_ms and until_ms > now then
    return sb_reply('busy')
  end
end
redis.call('HSET', K.connection, 'refreshing', A.claim .. '|' .. (now + tonumber(A.hold_ms)))
return sb_reply('claimed')
