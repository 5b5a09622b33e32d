-- break.lua - deletes grants whoever holds them (--break), and wakes the
-- first waiter.
--
-- KEYS[1]  the lease, P{NAME}
-- KEYS[2]  the waiters' queue, Pwaiters:{NAME}
-- KEYS[3]  the shared holders, Pholders:{NAME}
-- KEYS[4]  their limit, Plimit:{NAME}
-- ARGV[1]  the slot to break, or -1 for all
-- ARGV[2]  the release channel, Preleased:{NAME}
-- ARGV[3]  the wake channel prefix, Pwake:{NAME}:
-- ARGV[4]  the holder key prefix, Pholder:{NAME}:
-- ARGV[5]  the slot key prefix, Pslot:{NAME}:
--
-- Deletes all the grants, or the holder of one of a semaphore's slots
-- (slot 0 of a plain or shared lease is all of it).  Returns how many
-- grants it deleted.
local k = tonumber(ARGV[1])
local lim = tonumber(redis.call('GET', KEYS[4])) or 0
local n = 0
if k < 0 or (lim < 2 and k == 0) then
  n = redis.call('DEL', KEYS[1])
  for _, tok in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
    n = n + redis.call('DEL', ARGV[4] .. tok)
  end
  for i = 0, lim - 1 do redis.call('DEL', ARGV[5] .. i) end
  redis.call('DEL', KEYS[3], KEYS[4])
elseif lim >= 2 then
  local tok = redis.call('GET', ARGV[5] .. k)
  if tok then
    redis.call('DEL', ARGV[5] .. k)
    n = redis.call('DEL', ARGV[4] .. tok)
    redis.call('ZREM', KEYS[3], tok)
    if redis.call('ZCARD', KEYS[3]) == 0 then
      redis.call('DEL', KEYS[4])
    end
  end
end
--#include wake.lua
return n
