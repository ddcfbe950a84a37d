-- adaptive.lua: a batch of calls on adaptive rates (sluice/fetch): one record per key owns the
-- key's rate, its pacing queue and its block, shared by every process. Mirrors
-- src/core/adaptive.rs step for step (the same doubles in the same order).
--
-- KEYS[k]   one key's record: 12 little-endian doubles (struct '<dddddddddddd'): rate (qps),
--           tail_us, block_until_us, hold_until_us, last_inc_us, win_start_us, cur_ok,
--           prev_ok, created_us, learned_qps, learned_until_us, mark (one GET and one SET ... PX)
-- ARGV[1]   now_us: integer µs, or '' to use the server clock (TIME)
-- then      per call, 16 fields: <key index (1-based)> <op> <weight> <ok> <max_wait_us>
--           <throttled> <block_us> <learned_qps> <learned_ttl_us> <max_qps> <min_qps>
--           <start_qps> <inc_abs> <inc_rel> <decrease> <burst>; op (the kind's operation codes,
--           src/store/kinds/adaptive.rs): 0 pace (reserve a slot; refused, uncharged, past
--           max_wait_us >= 0; `ok` successes are counted), 1 report (a response: block,
--           learned rate, throttled)
-- Returns   flat array per call: pace: delay_us (the slot starts at the latest of the tail,
--           now - burst / rate s and the block's end), rate in milli-qps (floor), admitted (0/1);
--           report: block_us left, rate in milli-qps, decreased (0/1); -2, 0, 0 when the key
--           holds a value of another type (another writer uses our prefix): nothing applied
-- Notes     PX = 600 s after the latest of now, the tail, the block, the hold and the learned
--           rate's end (capped at now + 600 s), whole ms; plus 60 s when now_us is given (a
--           test's ManualClock: Redis expires keys on its own clock). All KEYS share one slot.

local nargs = #ARGV
assert(nargs >= 17 and (nargs - 1) % 16 == 0 and #KEYS >= 1, 'adaptive: expected keys and calls')

local now
local margin = 0
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
  margin = 60000
end
local SECOND = 1000000
local KEEP = 600 * SECOND
local WINDOW = 500000
local FORMAT = '<dddddddddddd'
local FAST = 0.25

local out, n = {}, 0
for i = 2, nargs, 16 do
  local key = KEYS[tonumber(ARGV[i])]
  assert(key, 'adaptive: malformed call')
  local op, weight, ok, max_wait = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local throttled, block, learned, learned_ttl = ARGV[i + 5] == '1', tonumber(ARGV[i + 6]), tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8])
  local max_qps, min_qps, start_qps = tonumber(ARGV[i + 9]), tonumber(ARGV[i + 10]), tonumber(ARGV[i + 11])
  local inc_abs, inc_rel, decrease, burst = tonumber(ARGV[i + 12]), tonumber(ARGV[i + 13]), tonumber(ARGV[i + 14]), tonumber(ARGV[i + 15])

  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then
    if string.sub(v.err, 1, 10) ~= 'WRONGTYPE ' then error(v) end
    out[n + 1], out[n + 2], out[n + 3] = -2, 0, 0
  elseif v and #v ~= 96 then
    out[n + 1], out[n + 2], out[n + 3] = -2, 0, 0
  else
    local rate, tail, buntil, huntil, linc, wstart, cur, prev, created, lqps, luntil, mark = 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
    if v then rate, tail, buntil, huntil, linc, wstart, cur, prev, created, lqps, luntil, mark = struct.unpack(FORMAT, v) end
    if not (rate > 0) then
      rate, tail, buntil, huntil, linc, wstart, cur, prev, created, lqps, luntil, mark = start_qps, 0, 0, 0, now, now, 0, 0, now, 0, 0, 0
    end
    -- roll the half-second success window; the first call after a back-off period restarts it
    -- at the period's end (the served rate is measured while calls flow)
    if huntil > wstart and now >= huntil then
      prev, cur, wstart = 0, 0, huntil
    end
    if now >= wstart + 2 * WINDOW then
      prev, cur, wstart = 0, 0, now
    elseif now >= wstart + WINDOW then
      prev, cur, wstart = cur, 0, wstart + WINDOW
    end
    local function ceiling()
      if lqps > 0 and luntil > now then return math.min(max_qps, lqps) end
      return max_qps
    end
    local function clamp()
      rate = math.min(math.max(rate, min_qps), ceiling())
    end
    local r1, r3 = 0, 0
    if op == 0 then
      cur = cur + ok
      if ok > 0 and now >= huntil then
        local dt = now - linc
        if dt < 0 then dt = 0 elseif dt > SECOND then dt = SECOND end
        local rel = inc_rel
        if mark == 0 or rate < 0.9 * mark then rel = FAST end
        rate = rate + (inc_abs + rate * rel) * dt / SECOND
      end
      if now > linc then linc = now end
      clamp()
      local start = math.max(tail, now - burst * SECOND / rate, buntil)
      r1 = start - now
      if r1 < 0 then r1 = 0 end
      if max_wait >= 0 and r1 > max_wait then
        r3 = 0
      else
        tail = start + weight * SECOND / rate
        r3 = 1
      end
    elseif op == 1 then
      if learned > 0 then lqps, luntil = learned, now + learned_ttl end
      -- a block under way is extended only by a second or more (see src/core/adaptive.rs)
      if block > 0 then
        local floor = math.max(buntil, now)
        if buntil > now then floor = floor + SECOND end
        if now + block > floor then buntil = now + block end
      end
      if throttled and now >= huntil then
        local span = math.min(now - math.max(created, huntil), WINDOW + (now - wstart))
        local served = (prev + cur) / math.max(span / SECOND, 0.25)
        if now - math.max(created, huntil) >= WINDOW and served > 0 then
          mark = math.min(rate, served)
          rate = mark * (1 - decrease)
        else
          rate = math.min(math.max(rate * 0.5, mark * (1 - decrease)), rate)
        end
        huntil = now + math.max(block, SECOND)
        linc = huntil
        r3 = 1
      end
      clamp()
      r1 = math.max(buntil - now, 0)
    else
      error('adaptive: malformed call')
    end
    local last = math.max(now, tail, buntil, huntil, math.min(luntil, now + KEEP))
    local px = math.ceil((last + KEEP - now) / 1000) + margin
    redis.call('SET', key, struct.pack(FORMAT, rate, tail, buntil, huntil, linc, wstart, cur, prev, created, lqps, luntil, mark),
      'PX', string.format('%d', px))
    out[n + 1], out[n + 2], out[n + 3] = math.ceil(r1), math.floor(rate * 1000), r3
  end
  n = n + 3
end
return out
