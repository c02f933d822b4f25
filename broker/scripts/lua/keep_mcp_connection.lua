-- Keeps an MCP grant's OAuth connection: its record (tokens sealed) replaced, its creation time kept from
-- the first sign-in, and its id listed under its owner (a subject or a session). A refresh under way
-- (claim_mcp_refresh.lua) loses its claim: its tokens are older than these.
--
--!key connection  the connection's hash
--!key index       its owner's connection ids (zset, lex)
--!arg id          connection id
--!arg fields      the record's fields (JSON object of strings)
--
-- Returns {'ok', created_at ms}.

--!include lib/core.lua

local now = sb_now_ms()
local args = {'id', A.id}
for name, value in pairs(cjson.decode(A.fields)) do
  args[#args + 1] = name
  args[#args + 1] = value
end
redis.call('HSET', K.connection, unpack(args))
redis.call('HSETNX', K.connection, 'created_at', now)
redis.call('HDEL', K.connection, 'refreshing')
redis.call('ZADD', K.index, 0, A.id)
return sb_reply(redis.call('HGET', K.connection, 'created_at'))
