-- A page of one inbox index, oldest first, with each item's JSON: its members after the cursor (a
-- place in the lex order; '' for the first page), in lex order, which is `since` then session then call.
--
--!key items  every open item's JSON, by `<sid>|<call id>`
--!key index  the index of the filters asked
--!arg after  where the page starts, exclusive: a member or any text between two ('' for the first page)
--!arg count  how many to read
--
-- Returns {'ok', member, item JSON, ...}.

--!include lib/core.lua

local start = A.after == '' and '-' or '(' .. A.after
local members = redis.call('ZRANGE', K.index, start, '+', 'BYLEX', 'LIMIT', 0, tonumber(A.count))
local out = {'ok'}
for _, member in ipairs(members) do
  local item = redis.call('HGET', K.items, string.sub(member, 17))
  if item then
    out[#out + 1] = member
    out[#out + 1] = item
  end
end
return out
