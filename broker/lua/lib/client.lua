-- Library: the context of the scripts that act on one registration (ping, leave, lapse). Needs
-- lib/core.lua. Every script that includes it takes this KEYS and ARGV layout:
--
-- KEYS[1] meta  KEYS[2] events  KEYS[3] names  KEYS[4] client  KEYS[5] lease  KEYS[6] calls
-- KEYS[7] owed  KEYS[8] run  KEYS[9] deadlines (global)  KEYS[10] leases (global)
-- KEYS[11] continuations (global)
-- ARGV[1] channel  ARGV[2] session id  ARGV[3] client id

local function sb_client_context()
  return {
    meta = KEYS[1], events = KEYS[2], names = KEYS[3], client = KEYS[4], lease = KEYS[5],
    calls = KEYS[6], owed = KEYS[7], run = KEYS[8], deadlines = KEYS[9], leases = KEYS[10],
    continuations = KEYS[11], channel = ARGV[1], sid = ARGV[2], cid = ARGV[3], now = sb_now_ms(),
  }
end
