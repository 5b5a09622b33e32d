-- inspect.lua - who holds the lease, for --status (reads only).
--
-- KEYS[1]  the plain lease, P{NAME}
-- KEYS[2]  the holders, Pholders:{NAME}
-- KEYS[3]  their limit, Plimit:{NAME}
-- ARGV[1]  the holder key prefix, Pholder:{NAME}:
-- ARGV[2]  the slot key prefix, Pslot:{NAME}:
--
-- Returns {limit (0: none), the lease's value ("": free), its PTTL, then
-- for each live shared or slot holder its value, PTTL and slot (-1:
-- shared)}.
--#include now.lua
local lim = 0
if redis.call('EXISTS', KEYS[3]) == 1 then
  lim = tonumber(redis.call('GET', KEYS[3])) or 0
end
local out = {lim, redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1])}
local slots = {}
for k = 0, lim - 1 do
  local tok = redis.call('GET', ARGV[2] .. k)
  if tok then slots[tok] = k end
end
-- The holders whose time has not run out.
for _, tok in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], now, '+inf')) do
  local v = redis.call('GET', ARGV[1] .. tok)
  if v then
    out[#out + 1] = v
    out[#out + 1] = redis.call('PTTL', ARGV[1] .. tok)
    out[#out + 1] = slots[tok] or -1
  end
end
return out
