-- renew.lua - extends the plain lease, if it is still ours.
--
-- KEYS[1]  the lease, P{NAME}
-- ARGV[1]  our token
-- ARGV[2]  the TTL in ms
--
-- Returns 1 if extended, 0 if not ours (taken, broken, or expired).
local v = redis.call('GET', KEYS[1])
if v and string.match(v, '^(%S+) ') == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
