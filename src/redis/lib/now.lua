-- lib/now.lua - the server's clock, for the scripts that judge time.
--
-- Every time a script compares or records is the server's (TIME), never
-- a client's: the clients' clocks need not agree with each other.
--
-- Leaves t, TIME's reply {seconds, microseconds}, and now, the time in
-- Unix ms: an integer, which Lua's numbers hold exactly.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
