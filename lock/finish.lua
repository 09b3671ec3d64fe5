-- finish.lua: replace KEYS[1]'s token ARGV[1] with the marker
-- "finished:"..ARGV[1], kept for ARGV[2] ms, only while the key holds the
-- token (or already the marker: go-redis retried a call whose reply was
-- lost). Returns 1 when the marker is in place, 0 when the key is gone or
-- has another owner.
local v = redis.call("get", KEYS[1])
local marker = "finished:" .. ARGV[1]
if v == ARGV[1] or v == marker then
	redis.call("set", KEYS[1], marker, "px", ARGV[2])
	return 1
end
return 0
