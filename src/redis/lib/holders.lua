-- lib/holders.lua - who holds one lease (reads only): for inspect.lua
-- (--status) and list.lua (--list).  Needs now (lib/now.lua).
--
-- holders(plain, hkey, lkey, hpfx, spfx): the lease P{NAME}, its
-- holders Pholders:{NAME}, their limit Plimit:{NAME}, and the prefixes
-- Pholder:{NAME}: and Pslot:{NAME}:.  Returns {limit (0: none), the
-- lease's value ("": free), its PTTL, then for each live shared or slot
-- holder its value, PTTL and slot (-1: shared)}.
local function holders(plain, hkey, lkey, hpfx, spfx)
  local lim = 0
  if redis.call('EXISTS', lkey) == 1 then
    lim = tonumber(redis.call('GET', lkey)) or 0
  end
  local out = {lim, redis.call('GET', plain) or '', redis.call('PTTL', plain)}
  local slots = {}
  for k = 0, lim - 1 do
    local tok = redis.call('GET', spfx .. k)
    if tok then slots[tok] = k end
  end
  -- The holders whose time has not run out.
  for _, tok in ipairs(redis.call('ZRANGEBYSCORE', hkey, now, '+inf')) do
    local v = redis.call('GET', hpfx .. tok)
    if v then
      out[#out + 1] = v
      out[#out + 1] = redis.call('PTTL', hpfx .. tok)
      out[#out + 1] = slots[tok] or -1
    end
  end
  return out
end
