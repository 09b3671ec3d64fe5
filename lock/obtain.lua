-- obtain.lua, run when SET NX found KEYS[1] taken: set it to ARGV[1] with a
-- TTL of ARGV[2] ms if it is absent (it expired meanwhile) or already holds
-- ARGV[1] (this attempt's token: go-redis retried a SET whose first copy was
-- applied but whose reply was lost).
-- Returns 1 when the caller holds the key, 0 when another owner does, and 2
-- when the key holds a marker left by finish.lua (the guarded work is done).
local v = redis.call("get", KEYS[1])
if v == false or v == ARGV[1] then
	redis.call("set", KEYS[1], ARGV[1], "px", ARGV[2])
	return 1
end
if string.sub(v, 1, 9) == "finished:" then
	return 2
end
return 0
