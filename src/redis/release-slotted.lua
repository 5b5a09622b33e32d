-- release-slotted.lua - gives a shared holder's or a semaphore slot's
-- grant back, if it is still ours, and wakes the first waiter.
--
-- KEYS[1]  our holder key, Pholder:{NAME}:TOKEN
-- KEYS[2]  the waiters' queue, Pwaiters:{NAME}
-- KEYS[3]  our slot key, Pslot:{NAME}:K (a shared holder: KEYS[1] again)
-- KEYS[4]  the holders, Pholders:{NAME}
-- KEYS[5]  their limit, Plimit:{NAME}
-- KEYS[6]  the done mark, Pdone:{NAME}:TOKEN
-- ARGV[1]  our token
-- ARGV[2]  the release channel, Preleased:{NAME}
-- ARGV[3]  the wake channel prefix, Pwake:{NAME}:
-- ARGV[4]  "1" for a slot
--
-- Returns 1 if deleted, or if the done mark says that we did (a second
-- sending, after a lost reply); 0 if not ours.
local v = redis.call('GET', KEYS[1])
local ours = v and string.match(v, '^(%S+) ') == ARGV[1]
if ours then redis.call('DEL', KEYS[1]) end
if ARGV[4] == '1' then
  if redis.call('GET', KEYS[3]) == ARGV[1] then
    redis.call('DEL', KEYS[3])
  else
    ours = false
  end
end
--#include now.lua
-- We leave the holders, with those whose time has run out; the last
-- one out takes the limit with it.
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
redis.call('ZREM', KEYS[4], ARGV[1])
if redis.call('ZCARD', KEYS[4]) == 0 then
  redis.call('DEL', KEYS[5])
end
--#include wake.lua
if ours then
  -- The done mark, as in release.lua: a minute, far longer than any
  -- call.
  redis.call('SET', KEYS[6], '1', 'PX', 60000)
  return 1
end
return redis.call('EXISTS', KEYS[6])
