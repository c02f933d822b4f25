-- Reads an API key's lookup by its secret's hash, and refuses it when it, or any key it was minted
-- under, is revoked: a revoked key ends the keys minted under it at once, with no walk over them.
--
--!key lookup   apikey-secret:<sha256>
--!key revoked  apikeys-revoked
--
-- Returns {'ok', id, label, permissions JSON, expires_at, ancestors, last_used_at} for a live key (each ''
-- when unset; ancestors: the ids of the keys it was minted under, nearest first, space-separated);
-- {'ok'} for an unknown or revoked one (itself or an ancestor).

--!include lib/core.lua

local lookup, revoked = K.lookup, K.revoked
local key = redis.call('HMGET', lookup, 'id', 'label', 'permissions', 'expires_at', 'ancestors', 'last_used_at', 'revoked')
if not key[1] or key[7] == '1' then return sb_reply() end
local ancestors = key[5] or ''
if ancestors ~= '' then
  local ids = {}
  for id in string.gmatch(ancestors, '%S+') do ids[#ids + 1] = id end
  for _, at in ipairs(redis.call('HMGET', revoked, unpack(ids))) do
    if at then return sb_reply() end
  end
end
return sb_reply(key[1], key[2], key[3], key[4] or '', ancestors, key[6] or '')
