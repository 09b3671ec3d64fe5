-- notices.lua: the fetch ledger of one payment named by notices (Notices).
-- KEYS[1] is a hash: "epoch", the ledger's random identity, set by the
-- notice that creates it; "arrived", the count of notices that arrived;
-- "ev:<event id>", the place of an event's first copy; "recorded",
-- "gone" and "open", the highest count a fetch that recorded the payment,
-- found no such payment, or found it in no state to record covered.
--
-- ARGV[1] is the operation:
--   arrive ttl_ms epoch event_id -> {place, epoch}: a new ledger takes
--                                   epoch; a later copy of an event keeps
--                                   its first copy's place
--   state                        -> {arrived, recorded, gone, open, epoch}
--   cover ttl_ms place outcome epoch
--                                -> 1 when noted, 0 when the ledger is not
--                                   the one the fetch counted in (another
--                                   epoch: it expired or was lost and was
--                                   made anew) or no longer holds place
--                                   arrivals: nothing is noted, so that a
--                                   later arrival is never taken as covered
--                                   by a fetch that began before it.
local op = ARGV[1]
if op == "arrive" then
	redis.call("hsetnx", KEYS[1], "epoch", ARGV[3])
	local n = redis.call("hincrby", KEYS[1], "arrived", 1)
	if ARGV[4] ~= "" then
		local first = redis.call("hget", KEYS[1], "ev:" .. ARGV[4])
		if first then
			n = tonumber(first)
		else
			redis.call("hset", KEYS[1], "ev:" .. ARGV[4], n)
		end
	end
	-- A ledger that only holds arrivals lives briefly (a delivery's
	-- length, with room); a fetch's cover keeps it longer.
	if redis.call("pttl", KEYS[1]) < tonumber(ARGV[2]) then
		redis.call("pexpire", KEYS[1], tonumber(ARGV[2]))
	end
	return {n, redis.call("hget", KEYS[1], "epoch")}
end
local h = redis.call("hmget", KEYS[1], "arrived", "recorded", "gone", "open", "epoch")
local arrived = tonumber(h[1] or "0") or 0
if op == "state" then
	return {arrived, tonumber(h[2] or "0") or 0, tonumber(h[3] or "0") or 0, tonumber(h[4] or "0") or 0, h[5] or ""}
end
-- cover
local place = tonumber(ARGV[3])
local field = ARGV[4]
if h[5] ~= ARGV[5] or arrived < place then
	return 0
end
local idx = {recorded = 2, gone = 3, open = 4}
local was = tonumber(h[idx[field]] or "0") or 0
if place > was then
	redis.call("hset", KEYS[1], field, place)
end
if redis.call("pttl", KEYS[1]) < tonumber(ARGV[2]) then
	redis.call("pexpire", KEYS[1], tonumber(ARGV[2]))
end
return 1
