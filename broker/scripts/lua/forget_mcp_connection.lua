-- Forgets an MCP grant's OAuth connection, tokens and all; the next step that needs it asks again.
--
--!key connection  the connection's hash
--!key index       its owner's connection ids (zset, lex)
--!arg id          connection id
--!arg owner       the owner the caller read from the record (a record of another owner is not removed)
--
-- Returns {'ok'}, or a refusal: no_mcp_connection.

--!include lib/core.lua

if redis.call('HGET', K.connection, 'owner') ~= A.owner then
  return sb_refuse('not_found', 'no_mcp_connection', A.id)
end
redis.call('DEL', K.connection)
redis.call('ZREM', K.index, A.id)
return sb_reply()
