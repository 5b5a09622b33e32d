-- acquire.lua - one try for the plain lease (no --limit, no --shared).
--
-- KEYS[1]  the lease, P{NAME}: "TOKEN FENCE PID SINCE HOST", PX = TTL
-- KEYS[2]  the fence counter, Pfence:{NAME}
-- KEYS[3]  the waiters' queue, Pwaiters:{NAME}
-- KEYS[4]  the shared holders, Pholders:{NAME}
-- KEYS[5]  their limit, Plimit:{NAME}
-- ARGV[1]  our token
-- ARGV[2]  the TTL in ms
-- ARGV[3], ARGV[4], ARGV[5]  our pid, since and host, for the lease's
--          value
-- ARGV[6]  "1": on BUSY, join the waiters' queue, and on a grant leave
--          it (only a try with "1" can have joined it)
--
-- Returns {1, fence} when granted, {0, pttl} when held by another (pttl
-- -1: by shared holders), {2, limit} when held by a semaphore's holders.

-- Joins the queue by arrival (the server's clock in microseconds); NX
-- keeps a waiter's place across its tries.
local function queue()
  if ARGV[6] == '1' then
    local t = redis.call('TIME')
    redis.call('ZADD', KEYS[3], 'NX', t[1] * 1000000 + t[2], ARGV[1])
    redis.call('PEXPIRE', KEYS[3], 60000)
  end
end
local v = redis.call('GET', KEYS[1])
if v then
  local tok, f = string.match(v, '^(%S+) (%d+) ')
  -- Ours already: a try sent again after its reply was lost.  Extend it
  -- and give the same fence back.
  if tok == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, f}
  end
  queue()
  return {0, redis.call('PTTL', KEYS[1])}
end
local t = redis.call('TIME')
-- Shared or semaphore holders whose time has not run out keep the plain
-- lease out.
if redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', t[1] * 1000 + math.floor(t[2] / 1000))
  if redis.call('ZCARD', KEYS[4]) > 0 then
    local lim = tonumber(redis.call('GET', KEYS[5]))
    if lim and lim ~= 1 then return {2, lim} end
    queue()
    return {0, -1}
  end
end
--#include fence.lua
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. f .. ' ' .. ARGV[3] ..
  ' ' .. ARGV[4] .. ' ' .. ARGV[5], 'NX', 'PX', ARGV[2])
if ARGV[6] == '1' then redis.call('ZREM', KEYS[3], ARGV[1]) end
return {1, f}
