-- lib/fence.lua - the next fence, stored back in the counter.
--
-- The next fence is the larger of the counter plus one and the server's
-- clock in microseconds.  A counter that a restart without persistence,
-- a lost second of appendfsync everysec or a failover took back then
-- cannot repeat a fence, as long as the server's clock does not go back
-- across the loss; and fences stay below 2^53, exact in Lua's numbers.
-- Written with %d: Lua's own number format would round it.
--
-- Needs t, TIME's reply, and KEYS[2], the fence counter.  Leaves f, the
-- new fence, as a string of digits.
local f = (tonumber(redis.call('GET', KEYS[2])) or 0) + 1
f = string.format('%d', math.max(f, t[1] * 1000000 + t[2]))
redis.call('SET', KEYS[2], f)
