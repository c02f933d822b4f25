-- Library: handing the calls that wait for their client (lib/calls.lua sb_park) to a registration that
-- holds the client name they wait for. Needs lib/core.lua, lib/events.lua, lib/partition.lua,
-- lib/calls.lua, lib/call.lua and lib/client.lua.

-- The `client_tool_dispatched` body a call was first sent with, made out to registration `cid`: every
-- body starts with its type and client_id (the catalogue's order), so only that prefix changes and the
-- arguments go again byte for byte. Nil when the body does not start so (a record of an older release).
local function sb_dispatch_to(rec, cid)
  local head = '{"type":"client_tool_dispatched","client_id":'
  local old = head .. sb_str(rec.client)
  local body = rec.dispatch
  if not body or string.sub(body, 1, #old) ~= old then return nil end
  return head .. sb_str(cid) .. string.sub(body, #old + 1)
end

-- Dispatches to registration `cid` (hash `client`, call stream `stream`), which holds the name `name`,
-- every call waiting for that name whose tool it offers: `client_tool_dispatched` again with the same
-- call_id, the ack deadline (and after the ack, the result deadline) counted afresh. The calls of a
-- name are read from their own list, so this costs nothing when none waits. A call that would not fit
-- the session's storage stays waiting (its deadline still runs). Reads S.meta, S.events, S.calls,
-- S.owed. Returns how many were dispatched.
local function sb_take_waiting(S, name, cid, client, stream, ack_ms, retention_ms)
  local ids, raw = sb_waiting_ids(S, name)
  if not raw then return 0 end
  local kept, seen, taken = {}, {}, 0
  for _, id in ipairs(ids) do
    local found = redis.call('HGET', S.calls, id)
    local rec = found and sb_read_call(S.calls, id, found)
    if rec and rec.state == 'waiting' then
      local body = sb_holds(client, rec.tool, seen) and sb_dispatch_to(rec, cid)
      if body and not sb_room(S.meta, S.now, 2 * #body + 3 * SB_ENTRY + 256, SB_P.cap) then
        rec.client, rec.cname, rec.ws = cid, nil, nil
        S.call_id = id
        local _, seq = sb_dispatch(S, rec, stream, body, ack_ms, retention_ms)
        -- The call's wait is over: its redispatch closes the inbox's item (a notice for it alone;
        -- client_tool_dispatched is not notable by type).
        SB_NOTICE.leave(S.sid, seq)
        taken = taken + 1
      else
        kept[#kept + 1] = id
      end
    end
  end
  sb_set_waiting(S, name, kept, raw)
  return taken
end
