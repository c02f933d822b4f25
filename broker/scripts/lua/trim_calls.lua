-- Forgets a session's settled calls once they are older than the settled-call retention (the timekeeper,
-- when the session's trim timer `c|<session id>` in the partition's purge index comes due). The caller
-- read the event log from where the last trim stopped and names the calls whose `tool_result` is old
-- enough: a `tool_result` is appended as a call settles, so none of them is still owed. Their records
-- leave the calls hash; the call streams of the registrations that had calls lose entries older than
-- any call could still need (two ack deadlines, as at each dispatch); the timer moves on. The input
-- requests the calls made go with them.
--
--!key meta         the session's record
--!key calls        its calls
--!key inputs       its input requests (those of the calls forgotten go with them)
--!key streams...   call streams to trim
--!arg sid          session id
--!arg read_to      the seq the log was read to
--!arg due          when the timer is next due (ms)
--!arg minid        the streams' MINID (ms)
--!arg call_ids...  call ids to forget
--
-- What the records (and their call stream entries) counted toward the session's storage is released.
-- Returns {'ok', 'trimmed' | 'gone'}: 'gone' when the session no longer lives (its timer is dropped).

--!include lib/core.lua
--!include lib/partition.lua

local S = {meta = K.meta}
local member = 'c|' .. A.sid
if not sb_session_live(S) then
  redis.call('ZREM', SB_P.purges, member)
  return sb_reply('gone')
end
if #A.call_ids > 0 then
  local released = 0
  for i, raw in ipairs(redis.call('HMGET', K.calls, unpack(A.call_ids))) do
    -- As lib/core.lua counted it (sb_call_count); `sb` is a top-level number (inner JSON is escaped).
    if raw then
      released = released + #raw + #A.call_ids[i] + SB_ENTRY + tonumber(string.match(raw, '"sb":(%d+)') or 0)
      -- A call that asked the person lists its requests (`irs`, ask_input.lua): their entries and keys go too.
      if string.find(raw, '"irs":', 1, true) then
        local call_id = A.call_ids[i]
        for _, id in ipairs(cjson.decode(raw).irs) do
          local entry = redis.call('HGET', K.inputs, id)
          if entry then
            local field = 'k:' .. #call_id .. ':' .. call_id .. ':' .. cjson.decode(entry).key
            released = released + #entry + #field + 2 * (#id + SB_ENTRY)
            redis.call('HDEL', K.inputs, id, field)
          end
        end
      end
    end
  end
  redis.call('HDEL', K.calls, unpack(A.call_ids))
  sb_add(S.meta, -released)
end
for _, stream in ipairs(K.streams) do
  redis.call('XTRIM', stream, 'MINID', A.minid)
end
redis.call('HSET', S.meta, 'trimmed_seq', A.read_to)
sb_timer(SB_P.purges, tonumber(A.due), member)
return sb_reply('trimmed')
