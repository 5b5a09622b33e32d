-- release.lua - gives the plain lease back, if it is still ours, and
-- wakes the first waiter.
--
-- KEYS[1]  the lease, P{NAME}
-- KEYS[2]  the waiters' queue, Pwaiters:{NAME}
-- KEYS[3]  the done mark, Pdone:{NAME}:TOKEN
-- ARGV[1]  our token
-- ARGV[2]  the release channel, Preleased:{NAME}
-- ARGV[3]  the wake channel prefix, Pwake:{NAME}:
--
-- Returns 1 if deleted, or if the done mark says that we did (this is a
-- second sending, after a lost reply); 0 if not ours.
local v = redis.call('GET', KEYS[1])
if v and string.match(v, '^(%S+) ') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  -- The done mark lives a minute: far longer than any call, so that a
  -- release sent again after its reply was lost learns that its first
  -- sending released the lease, rather than taking "not ours" for a loss.
  redis.call('SET', KEYS[3], '1', 'PX', 60000)
  --#include wake.lua
  return 1
end
return redis.call('EXISTS', KEYS[3])
