-- The batch function of the Functions library (not a library a script includes): several calls of the
-- BATCHED scripts (broker/scripts/source.py), all of one partition, in one FCALL, each as if it were called
-- alone and each answered alone: an error in one (a bug; a refusal is an answer) is that call's answer,
-- and the calls after it still run. Every library's state starts once for the batch and is written once
-- as it ends.
--
-- keys: the keys every call ends with (its partition's), then each call's own keys, in order.
-- args: the number of calls, the number of shared keys, then per call: script name, its number of own
-- keys, its number of arguments, its arguments. Returns one reply (or error) per call, in order.
-- SB_BATCHED (built with the library) holds each batched script's {function, binder}.

local function sb_batch(keys, args)
  sb_begin()
  local shared = tonumber(args[2])
  local replies, k, a = {}, shared + 1, 3
  for i = 1, tonumber(args[1]) do
    local script, nk, na = SB_BATCHED[args[a]], tonumber(args[a + 1]), tonumber(args[a + 2])
    a = a + 3
    local call_keys, call_args = {}, {}
    for j = 1, nk do call_keys[j] = keys[k + j - 1] end
    for j = 1, shared do call_keys[nk + j] = keys[j] end
    for j = 1, na do call_args[j] = args[a + j - 1] end
    k, a = k + nk, a + na
    KEYS, ARGV = call_keys, call_args
    script[2]()
    local ok, reply = pcall(script[1])
    if ok then
      replies[i] = reply
    elseif type(reply) == 'table' and reply.err then
      replies[i] = reply
    else
      replies[i] = {err = tostring(reply)}
    end
  end
  sb_end()
  return replies
end
