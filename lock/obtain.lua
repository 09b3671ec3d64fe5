-- obtain.lua: set KEYS[1] to this attempt's token ARGV[1] for ARGV[2] ms,
-- unless another owner holds it. Run by Obtain when SET NX found KEYS[1]
-- taken, and for every fenced Obtain.
--
-- With a second key, KEYS[2] is the key's fence counter (same cluster slot):
-- taking a free key INCRs it and stores the fence with the token, as
-- ARGV[1].."/"..fence, in the same atomic step.
--
-- The key is ours, and reset to its full TTL, when it is absent (free, or
-- expired since SET NX) or already holds our token: go-redis retried a
-- command whose first copy was applied but whose reply was lost. A retried
-- fenced obtain returns the fence minted by its first copy, never a second.
--
-- Returns {1, fence} when the caller holds the key (fence 0 when unfenced),
-- {0, pttl} when another owner does, and {2, pttl} when the key holds the
-- marker left by finish.lua (the guarded work is done); pttl is the key's
-- remaining TTL in ms.
local v = redis.call("get", KEYS[1])
local fenced = KEYS[2] ~= nil
if v == false then
	if fenced then
		local fence = redis.call("incr", KEYS[2])
		redis.call("set", KEYS[1], ARGV[1] .. "/" .. fence, "px", ARGV[2])
		return {1, fence}
	end
	redis.call("set", KEYS[1], ARGV[1], "px", ARGV[2])
	return {1, 0}
end
if v == ARGV[1] then
	redis.call("set", KEYS[1], v, "px", ARGV[2])
	return {1, 0}
end
local mine = ARGV[1] .. "/"
if fenced and string.sub(v, 1, #mine) == mine then
	redis.call("set", KEYS[1], v, "px", ARGV[2])
	return {1, tonumber(string.sub(v, #mine + 1))}
end
if string.sub(v, 1, 9) == "finished:" then
	return {2, redis.call("pttl", KEYS[1])}
end
return {0, redis.call("pttl", KEYS[1])}
