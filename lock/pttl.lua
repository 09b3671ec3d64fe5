-- pttl.lua: the remaining TTL of KEYS[1] in ms while it holds ARGV[1], else -3.
if redis.call("get", KEYS[1]) == ARGV[1] then
	return redis.call("pttl", KEYS[1])
end
return -3
