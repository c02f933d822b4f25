-- Accepts user input by the session's message concurrency policy (held in meta since its creation;
-- lib/input.lua sb_take_input). Input may bring run-scoped client tools: a registration that lives as
-- long as the run it joins.
--
--!layout lib/run.lua   (run_id is the id a new run takes)
--!layout lib/hot.lua   (token '': the route's caller was checked before)
--!key clients      the session's client ids (set)
--!key client       the run-scoped client's hash
--!arg input_id     the input id
--!arg text         its text
--!arg source       'client' | 'external'
--!arg scoped       the run-scoped client id ('' for none)
--!arg scoped_name  its name
--!arg tools        its tools JSON
--!arg tool_names   its tool names joined by "\n"
--!arg max_clients  the most active clients
--!arg max_len      the longest name
--!arg lease_s      its lease in seconds ('' for none: it lives as long as its run)
--
-- Returns {'ok', the answer's body: {"outcome": 'new_run' | 'steered', "run_id", "client_id" (the
-- run-scoped client; left out for none)}, SubmitOutcomeBody's JSON}; refusal not_found; refusal conflict
-- the policy is `drop` and a run is active, the session's storage is full (SWITCHBOARD_MAX_SESSION_BYTES),
-- `key_reused`, `key_in_flight`; refusal invalid_request no room for the run-scoped client.
-- The same run id or input id again (a retried request) changes nothing and answers the same, and so does
-- the same Idempotency-Key: its receipt is read and kept here, in the same step (lib/hot.lua).

--!include lib/core.lua
--!include lib/events.lua
--!include lib/partition.lua
--!include lib/calls.lua
--!include lib/run.lua
--!include lib/client.lua
--!include lib/input.lua
--!include lib/hot.lua

local S = sb_run_context()
local H = sb_hot_context()
local early = sb_hot_begin(S, H)
if early then return early end

-- Room for the receipt first (the answer is about 150 bytes), so no input is taken without it.
local full = sb_hot_receipt_room(S, H, 256)
if full then return full end
local taken = sb_take_input(S, {
  input_id = A.input_id, text = A.text, source = A.source, scoped = A.scoped, clients = K.clients, client = K.client,
  scoped_name = A.scoped_name, tools = A.tools, tool_names = A.tool_names, max_clients = A.max_clients,
  max_len = A.max_len, lease_s = A.lease_s,
})
if taken[1] ~= 'ok' then return sb_hot_keep(S, H, taken) end
-- As pydantic writes it (the ids are canonical UUIDs; a null client_id is left out).
return sb_hot_reply(S, H, '{"outcome":"' .. taken[2] .. '","run_id":"' .. taken[3] .. '"'
  .. (taken[4] ~= '' and (',"client_id":"' .. taken[4] .. '"') or '') .. '}')
