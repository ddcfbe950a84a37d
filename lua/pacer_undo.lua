-- pacer_undo.lua: takes back one member's charge of a PacerComposite call whose members live
-- in different Redis Cluster slots, when another member refused.
--
-- KEYS[1]  pacer state key
-- ARGV[1]  the raw state the charge wrote
-- ARGV[2]  the raw state before the charge, or '' if the key was absent
-- Returns  1 if restored; 0 if the key changed since (another call built on the charge, so it
--          stays: the error is on the side of admitting less, never more), or now holds a
--          value of another type (not ours: left alone)
-- Notes    compare-and-set: exact undo or nothing. The TTL the charge set is kept: it covers
--          the older state too (its tail is earlier, its drain time the same).

assert(#KEYS == 1 and #ARGV == 2, 'pacer_undo: expected 1 key and 2 arguments')
-- @include wrong_type
local v = redis.pcall('GET', KEYS[1])
if wrong_type(v) then return 0 end
if v ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
end
return 1
