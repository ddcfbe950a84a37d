-- pacer_block.lua: blocks a pacer (DistributedPacer.block; the pacer kind's op 'block',
-- src/store/kinds/pacer). Mirrors src/core/pacer/mod.rs `block`.
--
-- KEYS[1]   pacer state: 24 bytes, struct '<ddd' = watermark, next_shot_us, last_drip_us
-- ARGV      now_us (integer µs, or '' for the server clock), duration_us, qps, max_burst, factor
-- Returns   µs until the block ends (the queue tail: a later tail already queued is kept);
--           -2 when the key holds a value of another type (another writer uses our key
--           prefix): nothing is written
-- Notes     the bucket is set full and the tail to the block's end: rate-limit calls are
--           refused and paced calls wait until then, and calls resume at qps after it.
--           PX = the block, then the bucket's drain, in whole seconds, + 120 s (at most 10 years).

assert(#ARGV == 5 and #KEYS == 1, 'pacer_block: expected a key and 5 arguments')
-- @include clock
-- @include wrong_type
local duration, qps, burst, factor = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local queued = now
local v = redis.pcall('GET', KEYS[1])
if wrong_type(v) then return { -2 } end
if v and #v == 24 then
  local _, n = struct.unpack('<ddd', v)
  if n == n and n < math.huge and n > -math.huge then queued = n end
end
local tail = now + duration
if queued > tail then tail = queued end
local busy = tail - now + burst * 1000000 / (qps * factor)
local ttl = math.ceil(busy / 1000000) * 1000 + 120000
if ttl > 315360000000 then ttl = 315360000000 end
redis.call('SET', KEYS[1], struct.pack('<ddd', burst, tail, now), 'PX', string.format('%.0f', ttl))
return { tail - now }
