-- Library: the hot routes (ack, result, progress, ping) answered in one script: the session token
-- checked, the Idempotency-Key receipt replayed or written, and the answer (an outcome and its body, or a
-- refusal) kept as the key's receipt. Check, act and record happen atomically, so a repeated key can
-- never act twice and never needs to wait. Needs lib/core.lua. `H` holds: tokens (key), token (its
-- SHA-256, '' when an API key was checked by the caller), receipt (key), fp (the request's fingerprint,
-- '' for no receipt), ttl (ms), cap (SWITCHBOARD_MAX_SESSION_BYTES; receipts count toward it,
-- lib/core.lua sb_add_receipt), uncounted (true for a ping: its receipt lives 5 minutes and is not
-- counted; the rate limit bounds how many there are, and a ping stores nothing else). A script that
-- takes `--!layout lib/hot.lua` is handed these after its other layouts' (sb_hot_context reads them):
--
--!key tokens    the session's tokens (hash)
--!key receipt   the Idempotency-Key receipt
--!arg token     the token's SHA-256 ('' when the caller checked an API key)
--!arg fp        the request's fingerprint ('' for no Idempotency-Key)
--!arg ttl       the receipt's ttl (ms)
--!setup sb_hot_begin_call

-- The token and the session this call or batch of calls found good (forgotten as the next begins). A
-- batch's calls mostly share both, and none of them revokes a token or deletes a session, so each is read
-- once per batch.
local sb_token_good, sb_tokens_good, sb_meta_live = nil, nil, nil

local function sb_hot_begin_call()
  sb_token_good, sb_tokens_good, sb_meta_live = nil, nil, nil
end

-- H for a script of a session's partition (it reads SB_P).
local function sb_hot_context()
  return {tokens = K.tokens, receipt = K.receipt, token = A.token, fp = A.fp, ttl = A.ttl, cap = SB_P.cap}
end

-- A receipt kept by a release before outcomes, which kept the API's answer itself: `H<status> <fp> <body>`
-- or JSON {status, fp, body}. Read as the outcome its status stood for, a refusal's message as written.
-- Such receipts live a day at most (CALL_RECEIPT_MS): this table goes with the release after next.
local SB_EARLIER = {['200'] = 'ok', ['204'] = 'ok', ['400'] = 'invalid_request', ['401'] = 'unauthorized',
  ['404'] = 'not_found', ['409'] = 'conflict'}

local function sb_earlier_receipt(raw)
  local status, fp, body
  if string.sub(raw, 1, 1) == '{' then
    local rec = cjson.decode(raw)
    -- A route answered through api/keyed.py (idem_begin.lua, idem_finish.lua) kept `outcome` and `body`,
    -- and while its attempt runs an `owner`.
    if rec.outcome == 'ok' or rec.outcome == 'created' then return rec.fp, {'ok', rec.body} end
    if rec.outcome then return rec.fp, {rec.outcome, 'as_written', cjson.decode(rec.body).error.message} end
    if rec.owner then return rec.fp, {'conflict', 'key_in_flight'} end
    status, fp, body = tostring(rec.status), rec.fp, rec.body
  else
    status, fp, body = string.match(raw, '^H(%d+) (%S+) (.*)$')
  end
  local outcome = SB_EARLIER[status or '']
  if not outcome then return fp, nil end
  if outcome == 'ok' then return fp, {outcome, body} end
  return fp, {outcome, 'as_written', cjson.decode(body).error.message}
end

-- nil when the operation may act; else the answer it must give instead (a refusal, or a receipt's replay).
local function sb_hot_begin(S, H)
  if H.token ~= '' and (H.token ~= sb_token_good or H.tokens ~= sb_tokens_good) then
    local raw = redis.call('HGET', H.tokens, H.token)
    -- A record is `<expires_at> <id>` (credentials.py token_record), or JSON as written before it.
    local expires = raw and tonumber(string.match(raw, '^(%d+) ') or string.match(raw, '"expires_at":(%d+)'))
    if not expires or expires <= S.now then return sb_refuse('unauthorized', 'token') end
    sb_token_good, sb_tokens_good = H.token, H.tokens
  end
  if S.meta ~= sb_meta_live then
    local live
    if H.uncounted then live = sb_session_exists(S) else live = sb_session_live(S) end
    if not live then return sb_refuse('not_found', 'no_session', S.sid) end
    sb_meta_live = S.meta
  end
  if H.fp == '' then return nil end
  local raw = redis.call('GET', H.receipt)
  if not raw then return nil end
  local outcome, fp, payload = string.match(raw, '^(%l[%l_]*) (%S+) (.*)$')
  local answer
  if outcome == 'ok' then
    answer = {outcome, payload}
  elseif outcome then
    answer = cjson.decode(payload)
    table.insert(answer, 1, outcome)
  else
    fp, answer = sb_earlier_receipt(raw)
  end
  if fp ~= H.fp or answer == nil then return sb_refuse('conflict', 'key_reused') end
  return answer
end

-- Keeps `answer` as the key's receipt, so a retry with the same key gets exactly it: `ok <fp> <body>`
-- (the body, an event, not escaped into a second document on every ack and result), or `<outcome> <fp>
-- <[reason, values...] as JSON>`. A refusal finding the session's storage full keeps no receipt: a retry
-- is refused the same way, or served once there is room. (An operation that succeeds checked for its
-- receipt's room first.)
local function sb_hot_keep(S, H, answer)
  if H.fp == '' then return answer end
  local ok = answer[1] == 'ok'
  local receipt
  if ok then
    receipt = 'ok ' .. H.fp .. ' ' .. answer[2]
  else
    receipt = answer[1] .. ' ' .. H.fp .. ' ' .. cjson.encode({unpack(answer, 2)})
  end
  if H.uncounted then
    redis.call('SET', H.receipt, receipt, 'PX', H.ttl)
    return answer
  end
  local size = #receipt + #H.receipt + SB_KEY
  if ok or not sb_room(S.meta, S.now, size, H.cap) then
    redis.call('SET', H.receipt, receipt, 'PX', H.ttl)
    sb_add_receipt(S.meta, S.now, H.ttl, size)
  end
  return answer
end

-- The answer 'ok' with `body`, kept as the receipt.
local function sb_hot_reply(S, H, body)
  return sb_hot_keep(S, H, {'ok', body})
end

-- nil when the session has room for `need` more bytes and the answer's receipt; else the refusal to
-- answer (with no receipt).
local function sb_hot_room(S, H, need)
  if H.fp ~= '' then need = need + #H.receipt + #H.fp + SB_KEY + 64 end
  return sb_room(S.meta, S.now, need, H.cap)
end

-- For an operation whose own room is checked apart (a registration, input): nil when the request keeps
-- no receipt or the session has room for one holding an answer of `answer` bytes; else the refusal.
local function sb_hot_receipt_room(S, H, answer)
  if H.fp == '' then return nil end
  return sb_hot_room(S, H, answer)
end

-- How the call routes (ack, result, progress; they include lib/call.lua) begin: the request checked,
-- then the call as this client may see it. Returns the call's record, or nil and the answer to give.
local function sb_hot_own_call(S, H)
  local early = sb_hot_begin(S, H)
  if early then return nil, early end
  local rec = sb_own_call(S)
  if not rec then return nil, sb_hot_keep(S, H, sb_refuse('not_found', 'no_call', S.cid, S.call_id)) end
  return rec
end
