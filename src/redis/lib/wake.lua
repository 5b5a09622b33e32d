-- lib/wake.lua - after a release or a break: wakes the first live
-- waiter, then tells the release channel.
--
-- A waiter is live while its wake channel has a subscriber.  The dead
-- ones (a waiter killed without leaving the queue) are dropped on the
-- way, so that one release wakes one waiter that is still there, not
-- all of them.
--
-- Needs KEYS[2], the waiters' queue (a sorted set of queue entries),
-- ARGV[2], the release channel, and ARGV[3], the wake channel prefix (an
-- entry's channel is the prefix and the entry).
for _, w in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if redis.call('PUBLISH', ARGV[3] .. w, 'go') > 0 then break end
  redis.call('ZREM', KEYS[2], w)
end
redis.call('PUBLISH', ARGV[2], 'released')
