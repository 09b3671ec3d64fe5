-- notices.lua: the fetch ledger of one payment named by notices (Notices).
-- KEYS[1] is a hash: "arrived", the count of notices that arrived;
-- "covered", the highest count a recorded fetch covered; "gone", the
-- highest count a fetch that found no such payment covered.
--
-- ARGV[1] is the operation:
--   arrive ttl_ms           -> the notice's place (arrived after it)
--   state                   -> {arrived, covered, gone}
--   cover ttl_ms place gone -> 1 when noted, 0 when the hash no longer
--                              holds the arrivals the place counted (it
--                              expired or was lost): nothing is noted, so
--                              that a later arrival is never taken as
--                              covered by a fetch that began before it.
local op = ARGV[1]
if op == "arrive" then
	local n = redis.call("hincrby", KEYS[1], "arrived", 1)
	redis.call("pexpire", KEYS[1], tonumber(ARGV[2]))
	return n
end
local h = redis.call("hmget", KEYS[1], "arrived", "covered", "gone")
local arrived = tonumber(h[1] or "0") or 0
local covered = tonumber(h[2] or "0") or 0
local gone = tonumber(h[3] or "0") or 0
if op == "state" then
	return {arrived, covered, gone}
end
-- cover
local place = tonumber(ARGV[3])
if arrived < place then
	return 0
end
local field = "covered"
local was = covered
if ARGV[4] == "1" then
	field = "gone"
	was = gone
end
if place > was then
	redis.call("hset", KEYS[1], field, place)
end
redis.call("pexpire", KEYS[1], tonumber(ARGV[2]))
return 1
