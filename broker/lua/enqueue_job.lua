-- Performs a piece of owed work that is an arq job, in one round trip: writes the job the way arq's
-- enqueue_job does (job key with an expiry, then its id in the queue scored by its enqueue time), unless
-- the job or its result already exists (a repeat performs nothing twice); takes the work out of the
-- index; and wakes one waiting worker. The job body is serialized by arq's own serialize_job.
--
-- KEYS[1] arq:job:<id>  KEYS[2] arq:result:<id>  KEYS[3] the arq queue  KEYS[4] the work index
-- KEYS[5] the wake list
-- ARGV[1] job id  ARGV[2] serialized job  ARGV[3] job expiry ms  ARGV[4] queue score (enqueue time ms)
-- ARGV[5] the work index member  ARGV[6] how many wake tokens the list keeps at most
-- Returns 1 when the job was written, 0 when it already existed.

local written = 0
if redis.call('EXISTS', KEYS[1], KEYS[2]) == 0 then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
  written = 1
end
redis.call('ZREM', KEYS[4], ARGV[5])
-- A token per job, capped: with no worker running the list must not grow without bound, and a woken
-- worker reads every due job in one poll however many tokens it took to wake it.
redis.call('LPUSH', KEYS[5], '1')
redis.call('LTRIM', KEYS[5], 0, tonumber(ARGV[6]) - 1)
return written
