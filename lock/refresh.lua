-- refresh.lua: set the TTL of KEYS[1] to ARGV[2] ms only while it holds ARGV[1].
-- Returns 1 when extended, 0 when the key is gone or has another owner.
if redis.call("get", KEYS[1]) == ARGV[1] then
	return redis.call("pexpire", KEYS[1], ARGV[2])
end
return 0
