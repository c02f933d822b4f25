-- Registers a client under the smallest free name (`web`, `web-2`, ...) among the session's active ones.
--
-- KEYS[1] meta  KEYS[2] events  KEYS[3] names  KEYS[4] clients  KEYS[5] client  KEYS[6] lease
-- KEYS[7] leases (global)
-- ARGV[1] channel  ARGV[2] session id  ARGV[3] client id  ARGV[4] requested name  ARGV[5] lifetime JSON
-- ARGV[6] ttl ms (0 for never)  ARGV[7] tools JSON  ARGV[8] tool names joined by "\n"
-- ARGV[9] max active clients  ARGV[10] max name length
-- Returns {0, assigned name, expires ms or -1}; {404, msg} no session; {400, msg} too many clients.
-- A client id that is already registered answers with what it was given (a retried request).

--!include lib/core.lua

local S = {meta = KEYS[1], events = KEYS[2], channel = ARGV[1], now = sb_now_ms()}
local names, clients, client, lease, leases = KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local sid, cid, wanted, lifetime = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local ttl, tools, tool_names = tonumber(ARGV[6]), ARGV[7], ARGV[8]
local max_clients, max_len = tonumber(ARGV[9]), tonumber(ARGV[10])

if not sb_session_live(S) then return sb_refuse(404, 'session') end

local existing = redis.call('HMGET', client, 'name', 'expires_at')
if existing[1] then return sb_reply(existing[1], tonumber(existing[2]) or -1) end

if redis.call('HLEN', names) >= max_clients then
  return sb_refuse(400, 'this session already has ' .. max_clients .. ' active clients, the limit;'
    .. ' one must leave or lapse before another can register')
end

local assigned = wanted
local k = 2
while redis.call('HEXISTS', names, assigned) == 1 do
  local suffix = '-' .. k
  assigned = string.sub(wanted, 1, max_len - #suffix) .. suffix
  k = k + 1
end

redis.call('HSET', names, assigned, cid)
redis.call('SADD', clients, cid)
redis.call('HSET', client, 'name', assigned, 'lifetime', lifetime, 'ttl_ms', ttl, 'tools', tools,
  'tool_names', tool_names, 'state', 'active', 'created_at', S.now)

local expires = -1
if ttl > 0 then
  expires = S.now + ttl
  redis.call('SET', lease, '1', 'PX', ttl)
  redis.call('ZADD', leases, expires, sid .. ':' .. cid)
  redis.call('HSET', client, 'expires_at', expires)
end

sb_append(S, '{"type":"client_registered","client_id":' .. sb_str(cid) .. ',"name":' .. sb_str(assigned)
  .. ',"lifetime":' .. lifetime .. ',"tools":' .. tools .. '}')
return sb_reply(assigned, expires)
