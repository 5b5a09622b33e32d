-- inspect.lua - who holds the lease, for --status (reads only).
--
-- KEYS[1]  the plain lease, P{NAME}
-- KEYS[2]  the holders, Pholders:{NAME}
-- KEYS[3]  their limit, Plimit:{NAME}
-- KEYS[4]  the waiters' queue, Pwaiters:{NAME}
-- ARGV[1]  the holder key prefix, Pholder:{NAME}:
-- ARGV[2]  the slot key prefix, Pslot:{NAME}:
--
-- Returns what holders() returns (lib/holders.lua), then the number of
-- waiters queued.
--#include now.lua
--#include holders.lua
local out = holders(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2])
out[#out + 1] = redis.call('ZCARD', KEYS[4])
return out
