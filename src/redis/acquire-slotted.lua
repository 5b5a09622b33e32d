-- acquire-slotted.lua - one try for a shared holder (--shared) or one of
-- the slots of a semaphore (--limit N, N > 1).
--
-- KEYS[1]  the plain lease, P{NAME}
-- KEYS[2]  the fence counter, Pfence:{NAME}
-- KEYS[3]  the waiters' queue, Pwaiters:{NAME}
-- KEYS[4]  the holders, Pholders:{NAME}: tokens scored by when they
--          expire (ms by the server's clock)
-- KEYS[5]  the limit they hold with, Plimit:{NAME} (1: shared holders)
-- KEYS[6]  our holder key, Pholder:{NAME}:TOKEN
-- ARGV[1]  our token
-- ARGV[2]  the TTL in ms
-- ARGV[3]  "PID SINCE HOST", the rest of our holder key's value
-- ARGV[4]  "1": on BUSY, join the waiters' queue, and on a grant leave it
-- ARGV[5]  the limit (1: shared)
-- ARGV[6]  the slot key prefix, Pslot:{NAME}:
-- ARGV[7]  the wake channel prefix, Pwake:{NAME}:
--
-- Returns {1, fence, slot} when granted, {0, pttl} when busy, {2, limit}
-- when the holders use another limit.
--
-- The plain lease's holder (limit 1) lets nobody in.  A shared run goes
-- in beside shared holders unless a live exclusive waiter is queued
-- ahead of it; a semaphore's run takes the lowest free slot if fewer
-- live runs of it are queued ahead than slots are free, so its waiters
-- are served in the order they came.  A waiter that has no subscriber
-- on its wake channel any more is dead, and dropped.  A grant wakes the
-- next waiter, which may come in too.  These runs wait in the queue as
-- "m:TOKEN", the plain lease's as "TOKEN".
local tok, ttl, lim = ARGV[1], ARGV[2], tonumber(ARGV[5])
local sp, wp, me = ARGV[6], ARGV[7], 'm:' .. ARGV[1]
--#include now.lua
-- Holders whose time has run out hold nothing.
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local function queue()
  if ARGV[4] == '1' then
    redis.call('ZADD', KEYS[3], 'NX', t[1] * 1000000 + t[2], me)
    redis.call('PEXPIRE', KEYS[3], 60000)
  end
end
-- Our grant, our slot's key and the limit live at least a TTL more.
local function extend(k)
  redis.call('PEXPIRE', KEYS[6], ttl)
  if lim > 1 then redis.call('PEXPIRE', sp .. k, ttl) end
  redis.call('ZADD', KEYS[4], now + ttl, tok)
  if redis.call('PTTL', KEYS[5]) < tonumber(ttl) then
    redis.call('PEXPIRE', KEYS[5], ttl)
  end
end
-- Ours already: a try sent again after its reply was lost.
local v = redis.call('GET', KEYS[6])
if v and string.match(v, '^(%S+) ') == tok then
  local k = 0
  for i = 1, lim - 1 do
    if redis.call('GET', sp .. i) == tok then k = i end
  end
  extend(k)
  return {1, string.match(v, '^%S+ (%d+)'), k}
end
local p = redis.call('PTTL', KEYS[1])
if p ~= -2 then
  if lim ~= 1 then return {2, 1} end
  queue()
  return {0, p}
end
local held = redis.call('ZCARD', KEYS[4]) > 0
local rec = tonumber(redis.call('GET', KEYS[5]))
if held and rec and rec ~= lim then return {2, rec} end
-- The live waiters of our kind queued ahead of us: shared runs wait
-- behind exclusive ones, a semaphore's runs behind each other.
local ahead = 0
for _, w in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  if w == me then break end
  local excl = string.sub(w, 1, 2) ~= 'm:'
  if (lim == 1) == excl then
    if redis.call('PUBSUB', 'NUMSUB', wp .. w)[2] > 0 then
      ahead = ahead + 1
    else
      redis.call('ZREM', KEYS[3], w)
    end
  end
end
local k = 0
if lim == 1 and ahead > 0 then
  queue()
  return {0, -1}
elseif lim > 1 then
  local free = 0
  k = -1
  for i = 0, lim - 1 do
    if redis.call('EXISTS', sp .. i) == 0 then
      free = free + 1
      if k < 0 then k = i end
    end
  end
  if free <= ahead then
    queue()
    return {0, -1}
  end
end
--#include fence.lua
redis.call('SET', KEYS[6], tok .. ' ' .. f .. ' ' .. ARGV[3], 'PX', ttl)
if lim > 1 then redis.call('SET', sp .. k, tok, 'PX', ttl) end
if not held or not rec then redis.call('SET', KEYS[5], lim) end
extend(k)
redis.call('ZREM', KEYS[3], me)
-- The next waiter may come in beside us: wake it (the first live one).
for _, w in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  if redis.call('PUBLISH', wp .. w, 'go') > 0 then break end
  redis.call('ZREM', KEYS[3], w)
end
return {1, f, k}
