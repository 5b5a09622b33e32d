-- run-start.lua - --once-per: records our run's start, unless a run
-- started less than the period ago (by the server's clock).
--
-- KEYS[1]  the run record, Prun:{NAME}: a hash of fence, start, host,
--          pid, period, end and status
-- ARGV[1]  the period in ms
-- ARGV[2]  our fence
-- ARGV[3]  our host
-- ARGV[4]  our pid
--
-- Returns {1, now} when recorded (or ours already: a second sending),
-- else {0, now, fence, start, host, pid, period, end, status} of the
-- record that holds us back.  Reading the clock, comparing and recording
-- are one atomic step.
--#include now.lua
local r = redis.call('HMGET', KEYS[1], 'fence', 'start', 'host',
  'pid', 'period', 'end', 'status')
if r[1] == ARGV[2] then return {1, now} end
if r[2] and now < tonumber(r[2]) + tonumber(ARGV[1]) then
  return {0, now, r[1], r[2], r[3], r[4], r[5], r[6], r[7]}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'fence', ARGV[2], 'start',
  string.format('%d', now), 'host', ARGV[3], 'pid', ARGV[4],
  'period', ARGV[1])
return {1, now}
