-- Library: the partition a script's session belongs to: its timer indexes, its work stream, its figures
-- and its alarm. Needs lib/core.lua before it.
--
-- Every script that includes this library is handed its partition's keys and arguments after its own
-- (broker/scripts/runner.py appends them from `PartitionKeys` in broker/keys.py), so a script never names them
-- and every key it touches shares the partition's hash tag:
--
--!key deadlines  timers of calls (zset scored by due ms, as every timer index here)
--!key leases     timers of ttl registrations
--!key steps      timers of running steps' leases
--!key dequeue    timers of debounced input
--!key purges     timers of deleted sessions' keys
--!key claims     timers of claimed work
--!key schedules  schedules by next fire time (members `<sid>:<schedule id>`)
--!key work      the partition's work (stream, group `workers`)
--!key alarm     the earliest due time the timekeeper was told of (string), and its channel
--!key stats     the partition's figures (hash)
--!arg cap       SWITCHBOARD_MAX_SESSION_BYTES (`SB_P.cap`, 0 for no bound; lib/core.lua sb_room)
--!setup sb_partition_begin
--!enter sb_partition_enter
--!teardown sb_flush_counts
--
-- The alarm holds the earliest due time the partition's timekeeper was told of; it is also the name of the
-- channel that tells it. A timer set earlier than the alarm (or while the alarm is unset or past) moves
-- the alarm and is published on that channel, so the timekeeper sleeps until exactly then without
-- reading any index in the meantime; `w` on the same channel says new work is in the stream.

local SB_P = {}
local sb_work_woken = false
local sb_alarm = nil
local sb_counted, sb_counted_stats = {}, nil

-- The alarm seen and the wake sent last hold for a call or a batch of calls of one partition.
local function sb_partition_begin()
  if sb_counted_stats ~= nil then sb_counted, sb_counted_stats = {}, nil end
  sb_work_woken, sb_alarm = false, nil
end

-- Points SB_P at this call's partition: the call's keys, bound by name (`K`), so none is copied, and
-- the cap as a number beside them (the build refuses a key named like a partition argument).
local function sb_partition_enter()
  SB_P = K
  SB_P.cap = tonumber(A.cap) or 0
end

-- The consumer group workers read the work stream through (broker/keys.py WORK_GROUP).
local SB_WORK_GROUP = 'workers'

-- The partition's figures (hash), summed over partitions by GET /metrics/cluster. Counters only grow;
-- `clients_active` and `runs_active` are gauges that move both ways. Latencies are histograms:
-- `<name>:le:<bucket ms>` counts observations in that bucket alone (the reader, broker/services/telemetry.py,
-- makes them cumulative over the same SB_MS_BUCKETS) and `<name>:sum_ms` their sum.
local SB_MS_BUCKETS = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 300000}
-- The buckets as text, made on first use (once per library load: a number costs a printf as text).
local SB_MS_LABELS = {}

local function sb_flush_counts()
  if sb_counted_stats == nil then return end
  for field, by in pairs(sb_counted) do
    if by ~= 0 then redis.call('HINCRBY', sb_counted_stats, field, by) end
  end
  sb_counted, sb_counted_stats = {}, nil
end

-- Counted as the call goes and written as it ends (the teardown), once per field: a batch of
-- acks adds to each of its figures once.
local function sb_count(field, by)
  if sb_counted_stats ~= SB_P.stats then
    sb_flush_counts()
    sb_counted_stats = SB_P.stats
  end
  sb_counted[field] = (sb_counted[field] or 0) + (by or 1)
end

local function sb_observe_ms(name, ms)
  if not SB_MS_LABELS[1] then
    for i, bound in ipairs(SB_MS_BUCKETS) do SB_MS_LABELS[i] = tostring(bound) end
  end
  local le = '+Inf'
  for i, bound in ipairs(SB_MS_BUCKETS) do
    if ms <= bound then
      le = SB_MS_LABELS[i]
      break
    end
  end
  sb_count(name .. ':le:' .. le)
  sb_count(name .. ':sum_ms', ms)
end

-- Sets `member` of timer index `index` due at `due` (ms, Redis's clock), and wakes the timekeeper when
-- this is now the partition's earliest timer. The time is the one sb_now_ms last read.
local function sb_timer(index, due, member)
  redis.call('ZADD', index, due, member)
  -- Read once per call or batch: a step setting a hundred deadlines reads the alarm once (only this
  -- sets it while a call runs).
  sb_alarm = sb_alarm or tonumber(redis.call('GET', SB_P.alarm) or '0')
  if sb_alarm <= math.floor(sb_time_us / 1000) or due < sb_alarm then
    sb_alarm = due
    redis.call('SET', SB_P.alarm, due)
    redis.call('PUBLISH', SB_P.alarm, due)
  end
end

-- Leaves a piece of work for the workers on the partition's stream: a step to run
-- (`s|sid|run|step|attempt`), a server tool call (`t|sid|call`), a run-scoped client to release
-- (`d|sid|client`), a notable event's notice (`n|sid|seq`). It is written in the same atomic step as whatever owes it, so nothing is owed to a
-- caller that might die before doing it; `w` on the alarm channel wakes the partition's worker.
local function sb_owe(member)
  redis.call('XADD', SB_P.work, '*', 'w', member)
  if not sb_work_woken then
    sb_work_woken = true
    redis.call('PUBLISH', SB_P.alarm, 'w')
  end
end

-- A notable event's notice (lib/core.lua SB_NOTICE): `n|sid|seq`, taken by a worker that reads the event
-- and hands it to its consumers (workers/notices.py), and done only once they all succeeded.
SB_NOTICE.leave = function(sid, seq)
  sb_owe('n|' .. sid .. '|' .. seq)
end

-- A work entry is done with (its step or call began, or it was stale): acknowledged, deleted, and its
-- claim timer dropped. '' (work begun by other means, as tests do) does nothing.
local function sb_work_done(entry)
  if entry == nil or entry == '' then return end
  redis.call('XACK', SB_P.work, SB_WORK_GROUP, entry)
  redis.call('XDEL', SB_P.work, entry)
  redis.call('ZREM', SB_P.claims, entry)
end
