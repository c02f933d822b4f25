-- Ends a refresh claimed by claim_mcp_refresh.lua: the refreshed fields kept (`keep`), the connection
-- forgotten because its refresh token was refused (`forget`), or the claim merely let go (`release`).
-- Nothing is written unless the claim still holds: a new sign-in in the meantime (which clears the claim)
-- or a later claimant wins over a late refresh.
--
--!key connection  the connection's hash
--!key index       its owner's connection ids (zset, lex)
--!arg id          connection id
--!arg claim       the claimant's token
--!arg outcome     keep | forget | release
--!arg fields      the fields to write on `keep` (JSON object of strings)
--
-- Returns {'ok', 'settled'} or {'ok', 'lost'} (the claim no longer held).

--!include lib/core.lua

local held = redis.call('HGET', K.connection, 'refreshing')
if not held or string.match(held, '^([^|]*)|') ~= A.claim then
  return sb_reply('lost')
end
if A.outcome == 'forget' then
  redis.call('DEL', K.connection)
  redis.call('ZREM', K.index, A.id)
  return sb_reply('settled')
end
if A.outcome == 'keep' then
  local args = {}
  for name, value in pairs(cjson.decode(A.fields)) do
    args[#args + 1] = name
    args[#args + 1] = value
  end
  if #args > 0 then
    redis.call('HSET', K.connection, unpack(args))
  end
end
redis.call('HDEL', K.connection, 'refreshing')
return sb_reply('settled')
