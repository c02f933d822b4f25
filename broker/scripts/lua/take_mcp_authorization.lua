-- Takes a pending MCP sign-in by its state, once: its record (the flow's sealed part dropped from Redis as
-- it is read), leaving a tombstone until the key lapses so that a replay is told apart from a stranger.
--
--!key authorization  the pending sign-in's hash (by the state's digest)
--
-- Returns {'ok', fields...} (flat name, value pairs), or a refusal: no_mcp_authorization,
-- mcp_authorization_used, mcp_authorization_expired.

--!include lib/core.lua

local found = redis.call('HGETALL', K.authorization)
if #found == 0 then return sb_refuse('invalid_request', 'no_mcp_authorization') end
if redis.call('HGET', K.authorization, 'used') == '1' then
  return sb_refuse('invalid_request', 'mcp_authorization_used')
end
redis.call('HSET', K.authorization, 'used', '1')
redis.call('HDEL', K.authorization, 'flow')
if tonumber(redis.call('HGET', K.authorization, 'expires_at')) <= sb_now_ms() then
  return sb_refuse('invalid_request', 'mcp_authorization_expired')
end
return sb_reply(unpack(found))
