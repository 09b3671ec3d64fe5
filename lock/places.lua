-- places.lua: take one of ARGV[1] places in the sorted set KEYS[1] for
-- token ARGV[3], leased for ARGV[2] milliseconds of Redis's own clock.
-- Places whose lease ran out (their holder died or lost Redis) are dropped
-- first. Returns 1 when taken, 0 when every place is held.
local t = redis.call("time")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call("zremrangebyscore", KEYS[1], "-inf", now)
if redis.call("zcard", KEYS[1]) >= tonumber(ARGV[1]) then
	return 0
end
redis.call("zadd", KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call("pexpire", KEYS[1], tonumber(ARGV[2]) * 2)
return 1
