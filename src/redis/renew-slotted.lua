-- renew-slotted.lua - extends a shared holder's or a semaphore slot's
-- grant, if it is still ours.
--
-- KEYS[1]  our holder key, Pholder:{NAME}:TOKEN
-- KEYS[2]  the holders, Pholders:{NAME}
-- KEYS[3]  their limit, Plimit:{NAME}
-- KEYS[4]  our slot key, Pslot:{NAME}:K (a shared holder: KEYS[1] again)
-- ARGV[1]  our token
-- ARGV[2]  the TTL in ms
-- ARGV[3]  "1" for a slot
--
-- Returns 1 if extended, 0 if not ours.
local v = redis.call('GET', KEYS[1])
if not (v and string.match(v, '^(%S+) ') == ARGV[1]) then
  return 0
end
if ARGV[3] == '1' then
  if redis.call('GET', KEYS[4]) ~= ARGV[1] then return 0 end
  redis.call('PEXPIRE', KEYS[4], ARGV[2])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
-- Our new expiry in the holders, in ms by the server's clock.
local t = redis.call('TIME')
redis.call('ZADD', KEYS[2], t[1] * 1000 + math.floor(t[2] / 1000) + ARGV[2], ARGV[1])
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
return 1
