-- Publishes an agent version: numbered from 1 per agent, and the one new sessions run from now on.
--
--!key agent        agent hash
--!key versions     the agent's version index
--!key version      version key
--!arg agent_id     agent id
--!arg version_id   version id
--!arg config       config JSON
--!arg provider_id  model provider id
--!arg created_at   created_at ms
--!arg secrets      the MCP grants' credentials JSON ('' for none), kept in a field of their own: never
--                  rendered
--
-- Returns {'ok', version number}; refusal not_found the agent is gone. A version id already published (a retried
-- request) answers with its number.

--!include lib/core.lua

if redis.call('EXISTS', K.agent) == 0 or redis.call('HGET', K.agent, 'deleted') == '1' then
  return sb_refuse('not_found', 'no_agent', A.agent_id)
end
local existing = redis.call('HGET', K.version, 'version')
if existing then return sb_reply(tonumber(existing)) end
local number = redis.call('HINCRBY', K.agent, 'versions', 1)
redis.call('HSET', K.version, 'id', A.version_id, 'agent_id', redis.call('HGET', K.agent, 'id'),
  'config', A.config, 'model_provider_id', A.provider_id, 'version', number, 'created_at', A.created_at)
if A.secrets ~= '' then redis.call('HSET', K.version, 'secrets', A.secrets) end
redis.call('ZADD', K.versions, 0, A.version_id)
redis.call('HSET', K.agent, 'live_version', A.version_id)
return sb_reply(number)
