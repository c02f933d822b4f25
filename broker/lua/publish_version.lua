-- Publishes an agent version: numbered from 1 per agent, and the one new sessions run from now on.
--
-- KEYS[1] agent hash  KEYS[2] the agent's version index  KEYS[3] version key
-- ARGV[1] version id  ARGV[2] config JSON  ARGV[3] model provider id  ARGV[4] created_at ms
-- ARGV[5] the MCP grants' credentials JSON ('' for none), kept in a field of their own: never rendered
-- Returns {0, version number}; {404, msg} the agent is gone. A version id already published (a retried
-- request) answers with its number.

--!include lib/core.lua

if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HGET', KEYS[1], 'deleted') == '1' then
  return sb_refuse(404, 'agent')
end
local existing = redis.call('HGET', KEYS[3], 'version')
if existing then return sb_reply(tonumber(existing)) end
local number = redis.call('HINCRBY', KEYS[1], 'versions', 1)
redis.call('HSET', KEYS[3], 'id', ARGV[1], 'agent_id', redis.call('HGET', KEYS[1], 'id'), 'config', ARGV[2],
  'model_provider_id', ARGV[3], 'version', number, 'created_at', ARGV[4])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[3], 'secrets', ARGV[5]) end
redis.call('ZADD', KEYS[2], 0, ARGV[1])
redis.call('HSET', KEYS[1], 'live_version', ARGV[1])
return sb_reply(number)
