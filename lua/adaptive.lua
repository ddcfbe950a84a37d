-- adaptive.lua: a batch of calls on adaptive rates (sluice/fetch): one record per key owns the
-- key's rate, its pacing queue and its block, shared by every process. Mirrors
-- src/core/adaptive/mod.rs step for step (the same doubles in the same order).
--
-- KEYS[k]   one key's record: 12 little-endian doubles (struct '<dddddddddddd'): rate (qps),
--           tail_us, block_until_us, hold_until_us, last_inc_us, win_start_us, cur_ok,
--           prev_ok, created_us, learned_qps, learned_until_us, mark (one GET and one SET ... PX)
-- ARGV[1]   now_us: integer µs, or '' to use the server clock (TIME)
-- then      per call, 17 fields: <key index (1-based)> <op> <weight> <ok> <max_wait_us>
--           <throttled> <block_us> <learned_qps> <learned_ttl_us> <max_qps> <min_qps>
--           <start_qps> <inc_abs> <inc_rel> <decrease> <burst> <sent_ago_us> (how long ago
--           the latest of the calls whose successes `ok` tells was sent); op (the kind's operation codes,
--           src/store/kinds/adaptive.rs): 0 pace (reserve a slot; refused, uncharged, past
--           max_wait_us >= 0; `ok` successes are counted), 1 report (`ok` as for a pace; a response: block,
--           learned rate, throttled), 2 give (a slot of weight its caller will not use, its start
--           from now in max_wait_us: while it is the last one queued, the tail moves back by its
--           width, never before now)
-- Returns   flat array per call: pace: delay_us (the slot starts at the latest of the tail,
--           now - burst / rate s and the block's end), rate in milli-qps (floor), admitted (0/1);
--           report: block_us left, rate in milli-qps, decreased (0/1); give: 0, rate in
--           milli-qps, given back (0/1); then, for all three, block_us
--           left (a pace tells every process of a block another's response recorded);
--           -2, 0, 0, 0 when the key holds a value of another type (another writer uses our
--           prefix): nothing applied
-- Notes     PX = 600 s after the latest of now, the tail, the block, the hold and the learned
--           rate's end (capped at now + 600 s), whole ms; plus 60 s when now_us is given (a
--           test's ManualClock: Redis expires keys on its own clock). All KEYS share one slot.

local nargs = #ARGV
assert(nargs >= 18 and (nargs - 1) % 17 == 0 and #KEYS >= 1, 'adaptive: expected keys and calls')

-- @include clock
-- @include wrong_type
local SECOND = 1000000
local KEEP = 600 * SECOND
local WINDOW = 1000000
local PLATEAU = 30 * SECOND
local BLIND = 16
local INC_CAP = 1.5
local FORMAT = '<dddddddddddd'
local FAST = 0.25

local out, n = {}, 0
for i = 2, nargs, 17 do
  local key = KEYS[tonumber(ARGV[i])]
  assert(key, 'adaptive: malformed call')
  local op, weight, ok, max_wait = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local throttled, block, learned, learned_ttl = ARGV[i + 5] == '1', tonumber(ARGV[i + 6]), tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8])
  local max_qps, min_qps, start_qps = tonumber(ARGV[i + 9]), tonumber(ARGV[i + 10]), tonumber(ARGV[i + 11])
  local inc_abs, inc_rel, decrease, burst = tonumber(ARGV[i + 12]), tonumber(ARGV[i + 13]), tonumber(ARGV[i + 14]), tonumber(ARGV[i + 15])
  local sent_ago = tonumber(ARGV[i + 16])

  local v = redis.pcall('GET', key)
  if wrong_type(v) or (v and #v ~= 96) then
    out[n + 1], out[n + 2], out[n + 3], out[n + 4] = -2, 0, 0, 0
  else
    local rate, tail, buntil, huntil, linc, wstart, cur, prev, created, lqps, luntil, mark = 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
    if v then rate, tail, buntil, huntil, linc, wstart, cur, prev, created, lqps, luntil, mark = struct.unpack(FORMAT, v) end
    if not (rate > 0) then
      rate, tail, buntil, huntil, linc, wstart, cur, prev, created, lqps, luntil, mark = start_qps, 0, 0, 0, now, now, 0, 0, now, 0, 0, 0
    end
    -- roll the one-second success windows (aligned to the record's creation; they run through
    -- blocks: a block's time counts as time in which nothing was served)
    if now >= wstart + 2 * WINDOW then
      prev, cur, wstart = 0, 0, wstart + math.floor((now - wstart) / WINDOW) * WINDOW
    elseif now >= wstart + WINDOW then
      prev, cur, wstart = cur, 0, wstart + WINDOW
    end
    -- successes per second over the last second (the previous window weighted by its share of it)
    local function served()
      local into = (now - wstart) / WINDOW
      if into < 0 then into = 0 elseif into > 1 then into = 1 end
      return (prev * (1 - into) + cur) * SECOND / WINDOW
    end
    local function ceiling()
      if lqps > 0 and luntil > now then return math.min(max_qps, lqps) end
      return max_qps
    end
    local function clamp()
      rate = math.min(math.max(rate, min_qps), ceiling())
    end
    -- the successes a process saw since it last told (see count_ok in src/core/adaptive/mod.rs):
    -- in the block after a measured decrease those of calls sent before it belong to that
    -- measure; else they count
    -- and, outside a back-off period and a plateau, raise the rate by their share of a
    -- second's climb while it is at most INC_CAP times what is served while calls flow
    local function count_ok()
      if ok <= 0 then return end
      if mark > 0 and now < buntil and now < huntil and now < wstart + WINDOW and now - sent_ago < wstart then
        local k = rate / mark
        mark = mark + ok * SECOND / WINDOW
        rate = mark * k
        return
      end
      cur = cur + ok
      local flowing = now - math.max(huntil, created)
      if flowing < WINDOW / 10 then flowing = WINDOW / 10 elseif flowing > WINDOW then flowing = WINDOW end
      if now >= huntil and now >= linc and rate < INC_CAP * (served() * WINDOW / flowing) then
        local rel = inc_rel
        if mark == 0 or rate < 0.9 * mark then rel = FAST end
        rate = rate + (inc_abs + rate * rel) * math.min(ok / rate, 1)
      end
    end
    local r1, r3 = 0, 0
    if op == 0 then
      count_ok()
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
      count_ok()
      if learned > 0 then lqps, luntil = learned, now + learned_ttl end
      -- a block under way is extended only by a second or more (see src/core/adaptive/mod.rs)
      if block > 0 then
        local floor = math.max(buntil, now)
        if buntil > now then floor = floor + SECOND end
        if now + block > floor then buntil = now + block end
      end
      if throttled and now >= huntil then
        local sv = served()
        local plateau = 0
        local lrate = 0
        if luntil > now then lrate = lqps end
        if lrate > 0 then
          -- the upstream stated its limit: settle under it
          mark = math.min(rate, lrate)
          rate = mark * (1 - decrease)
          plateau = PLATEAU
        elseif sv * BLIND >= rate then
          -- settle under what was served; after a fast climb of a second or more (no mark), at it
          local climbed = mark == 0 and now - math.max(created, huntil) >= SECOND
          mark = math.min(rate, sv)
          if climbed then rate = mark else rate = mark * (1 - decrease) end
          plateau = PLATEAU
        else
          -- a burst served, the rest refused: the geometric middle, by half to by BLIND
          mark = 0
          rate = math.min(math.max(math.sqrt(sv * rate), rate / BLIND), rate * 0.5)
        end
        huntil = now + math.max(block, SECOND)
        linc = huntil + plateau
        -- the next measure counts from here (the back-off period: nothing served)
        prev, cur, wstart = 0, 0, now
        r3 = 1
      end
      clamp()
      r1 = math.max(buntil - now, 0)
    elseif op == 2 then
      -- a slot of weight given back (its start from now in max_wait) while it is the last one
      -- queued: the tail moves back by its width, never before now
      local width = weight * SECOND / rate
      local tolerance = math.min(width / 2, 1000)
      if tail > now and math.abs(tail - (now + math.max(max_wait, 0) + width)) <= tolerance then
        tail = math.max(tail - width, now)
        r3 = 1
      end
    else
      error('adaptive: malformed call')
    end
    local last = math.max(now, tail, buntil, huntil, math.min(luntil, now + KEEP))
    local px = math.ceil((last + KEEP - now) / 1000) + margin
    redis.call('SET', key, struct.pack(FORMAT, rate, tail, buntil, huntil, linc, wstart, cur, prev, created, lqps, luntil, mark),
      'PX', string.format('%d', px))
    local r4 = buntil - now
    if r4 < 0 then r4 = 0 end
    out[n + 1], out[n + 2], out[n + 3], out[n + 4] = math.ceil(r1), math.floor(rate * 1000), r3, math.ceil(r4)
  end
  n = n + 4
end
return out
