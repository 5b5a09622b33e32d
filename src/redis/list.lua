-- list.lua - who holds each of a page of leases, for --list (reads
-- only; the page is what one SCAN returned, so the script is short).
--
-- KEYS[1]  the first name's fence key, read by nobody: it routes the
--          call on a cluster, where the names are all of its slot
-- ARGV[1]  the key prefix, P
-- ARGV[2]  lease names, separated by spaces (a name has none)
--
-- Returns, for each name, {name, waiters queued, what holders()
-- returns (lib/holders.lua)}.
--#include now.lua
--#include holders.lua
local P = ARGV[1]
local out = {}
for name in string.gmatch(ARGV[2], '%S+') do
  local t = '{' .. name .. '}'
  out[#out + 1] = {name, redis.call('ZCARD', P .. 'waiters:' .. t),
    holders(P .. t, P .. 'holders:' .. t, P .. 'limit:' .. t,
      P .. 'holder:' .. t .. ':', P .. 'slot:' .. t .. ':')}
end
return out
