-- How long until the earliest member of the timer indexes is due, by Redis's clock (the one the scores
-- were written with), so a sweeper can sleep exactly that long rather than a whole interval.
--
-- KEYS[1..n] timer indexes (zsets scored by due time, ms)
-- ARGV none
-- Returns ms until the earliest score (0 when one is already due), or -1 when every index is empty.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local earliest = nil
for _, index in ipairs(KEYS) do
  local first = redis.call('ZRANGE', index, 0, 0, 'WITHSCORES')
  if first[2] then
    local due = tonumber(first[2])
    if earliest == nil or due < earliest then earliest = due end
  end
end
if earliest == nil then return -1 end
return math.max(0, math.floor(earliest - now))
