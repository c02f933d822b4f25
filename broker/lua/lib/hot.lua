-- Library: the hot routes (ack, result, ping) answered in one script: the session token checked, the
-- Idempotency-Key receipt replayed or written, and the reply built as the HTTP status and body the API
-- sends as is. Check, act and record happen atomically, so a repeated key can never act twice and never
-- needs to wait. Needs lib/core.lua. `H` holds: tokens (key), token (its SHA-256, '' when an API key
-- was checked by the caller), receipt (key), fp (the request's fingerprint, '' for no receipt), ttl (ms),
-- cap (SWITCHBOARD_MAX_SESSION_BYTES; receipts count toward it, lib/core.lua sb_add_receipt), uncounted
-- (true for a ping: its receipt lives 5 minutes and is not counted; the rate limit bounds how many there
-- are, and a ping stores nothing else). A script that takes `--!layout lib/http.lua` is handed these
-- after its other layouts' (sb_http_context reads them):
--
--!key tokens    the session's tokens (hash)
--!key receipt   the Idempotency-Key receipt
--!arg token     the token's SHA-256 ('' when the caller checked an API key)
--!arg fp        the request's fingerprint ('' for no Idempotency-Key)
--!arg ttl       the receipt's ttl (ms)
--!setup sb_http_begin_call

local SB_CODES = {[400] = 'invalid_request', [401] = 'unauthorized', [404] = 'not_found', [409] = 'conflict'}

local function sb_envelope(status, message)
  return '{"error":{"code":"' .. SB_CODES[status] .. '","message":' .. sb_str(message) .. '}}'
end

-- The token and the session this call or batch of calls found good (forgotten as the next begins). A
-- batch's calls mostly share both, and none of them revokes a token or deletes a session, so each is read
-- once per batch.
local sb_token_good, sb_tokens_good, sb_meta_live = nil, nil, nil

local function sb_http_begin_call()
  sb_token_good, sb_tokens_good, sb_meta_live = nil, nil, nil
end

local function sb_http_context()
  return {tokens = K.tokens, receipt = K.receipt, token = A.token, fp = A.fp, ttl = A.ttl, cap = SB_P.cap}
end

-- nil when the operation may act; else the reply it must give instead (a refusal, or a receipt's replay).
local function sb_http_begin(S, H)
  if H.token ~= '' and (H.token ~= sb_token_good or H.tokens ~= sb_tokens_good) then
    local raw = redis.call('HGET', H.tokens, H.token)
    if not raw or cjson.decode(raw).expires_at <= S.now then
      return {401, sb_envelope(401, 'this session token is unknown or expired')}
    end
    sb_token_good, sb_tokens_good = H.token, H.tokens
  end
  if S.meta ~= sb_meta_live then
    local live
    if H.uncounted then live = sb_session_exists(S) else live = sb_session_live(S) end
    if not live then return {404, sb_envelope(404, 'no session ' .. S.sid)} end
    sb_meta_live = S.meta
  end
  if H.fp == '' then return nil end
  local raw = redis.call('GET', H.receipt)
  if not raw then return nil end
  local status, fp, body
  if string.sub(raw, 1, 1) == '{' then
    -- A receipt written before hot-route receipts took their own form.
    local rec = cjson.decode(raw)
    status, fp, body = rec.status, rec.fp, rec.body
  else
    status, fp, body = string.match(raw, '^H(%d+) (%S+) (.*)$')
    status = tonumber(status)
  end
  if fp ~= H.fp or status == nil then
    return {409, sb_envelope(409, 'this Idempotency-Key was already used with a different request')}
  end
  return {status, body}
end

-- The reply, kept as the key's receipt: a retry with the same key gets exactly this. `H<status> <fp>
-- <body>`, not JSON: the body (an event) is not escaped into a second document on every ack and result.
-- A refusal finding the session's storage full keeps no receipt: a retry is refused the same way, or
-- served once there is room. (An operation that succeeds checked for its receipt's room first.)
local function sb_http_reply(S, H, status, body)
  if H.fp ~= '' and H.uncounted then
    redis.call('SET', H.receipt, 'H' .. status .. ' ' .. H.fp .. ' ' .. body, 'PX', H.ttl)
  elseif H.fp ~= '' then
    local receipt = 'H' .. status .. ' ' .. H.fp .. ' ' .. body
    local size = #receipt + #H.receipt + SB_KEY
    if status < 400 or not sb_room(S.meta, S.now, size, H.cap) then
      redis.call('SET', H.receipt, receipt, 'PX', H.ttl)
      sb_add_receipt(S.meta, S.now, H.ttl, size)
    end
  end
  return {status, body}
end

local function sb_http_refuse(S, H, status, message)
  return sb_http_reply(S, H, status, sb_envelope(status, message))
end

-- nil when the session has room for `need` more bytes and the reply's receipt; else the 409 to answer
-- (with no receipt).
local function sb_http_room(S, H, need)
  if H.fp ~= '' then need = need + #H.receipt + #H.fp + SB_KEY + 64 end
  local full = sb_room(S.meta, S.now, need, H.cap)
  if full then return {409, sb_envelope(409, full)} end
  return nil
end

-- How the call routes (ack, result, progress; they include lib/call.lua) begin: the request checked,
-- then the call as this client may see it. Returns the call's record, or nil and the reply to give.
local function sb_http_own_call(S, H)
  local early = sb_http_begin(S, H)
  if early then return nil, early end
  local rec = sb_own_call(S)
  if not rec then return nil, sb_http_refuse(S, H, 404, 'client ' .. S.cid .. ' has no call ' .. S.call_id) end
  return rec
end
