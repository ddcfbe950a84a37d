-- pacer_give.lua: gives back weight a pacer call took and will not use (a caller that gave up
-- before its slot; DistributedPacer's outcome.cancel(); the pacer kind's op 'give',
-- src/store/kinds/pacer). Mirrors src/core/pacer/mod.rs `give`.
--
-- KEYS[1]   pacer state: 24 bytes, struct '<ddd' = watermark, next_shot_us, last_drip_us
-- ARGV      now_us (integer µs, or '' for the server clock), weight, qps, max_burst, factor,
--           start_in_us (the slot's start, µs from now, as the caller estimates it)
-- Returns   1 when given back, 0 when it stays spent; -2 when the key holds a value of another
--           type (another writer uses our key prefix): nothing written
-- Notes     a queued slot goes back only while it is the last one (the tail is its end, within
--           half its width or 1 ms): the tail moves back by ceil(weight * 1e6 / qps) µs, never
--           before now; one with later slots after it stays spent (0). With no queue and
--           start_in_us 0, the weight goes back to the bucket (after its leak, never below
--           empty). An absent or unreadable state has nothing to give back: nothing written.
--           PX = the queue, or the bucket's drain, in whole seconds, + 120 s (at most 10 years).

assert(#ARGV == 6 and #KEYS == 1, 'pacer_give: expected a key and 6 arguments')
-- @include clock
-- @include wrong_type
local weight, qps, burst, factor = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local start_in = tonumber(ARGV[6])
local v = redis.pcall('GET', KEYS[1])
if wrong_type(v) then return { -2 } end
if not v or #v ~= 24 then return { 0 } end
local w, n, l = struct.unpack('<ddd', v)
if not (w == w and n == n and l == l and w < math.huge and n < math.huge and l < math.huge
  and w > -math.huge and n > -math.huge and l > -math.huge) then
  return { 0 }
end
if n > now then
  local width = math.ceil(weight * 1000000 / qps)
  local tolerance = width / 2
  if tolerance > 1000 then tolerance = 1000 end
  if math.abs(n - (now + start_in + width)) > tolerance then return { 0 } end
  local back = n - width
  if back > now then n = back else n = now end
elseif start_in ~= 0 then
  return { 0 }
else
  local since = l
  if n > since then since = n end
  if since < now then w = w - (now - since) * qps * factor / 1000000 end
  w = w - weight
  if w < 0 then w = 0 end
  l = now
end
local busy = n - now
local drain = burst * 1000000 / (qps * factor)
if drain > busy then busy = drain end
local ttl = math.ceil(busy / 1000000) * 1000 + 120000
if ttl > 315360000000 then ttl = 315360000000 end
redis.call('SET', KEYS[1], struct.pack('<ddd', w, n, l), 'PX', string.format('%.0f', ttl))
return { 1 }
