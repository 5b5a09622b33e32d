-- run-end.lua - --once-per: stamps our run's end, by the server's clock,
-- on a record that still names our fence (a later run's record is not
-- ours to touch).
--
-- KEYS[1]  the run record, Prun:{NAME}
-- ARGV[1]  our fence
-- ARGV[2]  the command's exit status
--
-- Returns 1 if it stamped the record, 0 if the record is another run's.
if redis.call('HGET', KEYS[1], 'fence') ~= ARGV[1] then
  return 0
end
--#include now.lua
redis.call('HSET', KEYS[1], 'end', string.format('%d', now),
  'status', ARGV[2])
return 1
