-- Marks an MCP grant's OAuth connection's access token as ended (its server refused it with a 401), so
-- no worker sends it again, and its way to a refresh dropped: a server that refuses a token it issued
-- (its resource moved to another authorization server, the grant revoked) wants the person to sign in
-- again, as the `mcp` package's client does on a 401, not a refreshed token from where it came.
-- Only the token the caller saw is marked: a connection whose expiry changed since (a refresh or a new
-- sign-in put another token there) is left alone.
--
--!key connection  the connection's hash
--!arg seen        the `expires_at` the caller read with the refused token ('' for none)
--
-- Returns {'ok', 'expired'} or {'ok', 'changed'}.

--!include lib/core.lua

local now = redis.call('HGET', K.connection, 'expires_at')
if not now or now ~= A.seen then
  return sb_reply('changed')
end
redis.call('HSET', K.connection, 'expires_at', '0')
redis.call('HDEL', K.connection, 'endpoint')
return sb_reply('expired')
