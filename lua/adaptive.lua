-- adaptive.lua: a batch of calls on adaptive rates (sluice/fetch): one record per key owns the
-- key's rate, its pacing queue and its block, shared by every process. Mirrors
-- src/core/adaptive/mod.rs step for step (the same doubles in the same order).
--
-- KEYS[k]   one key's record (<prefix>:adaptive:v2:{<key>}): 59 little-endian doubles: rate
--           (qps), tail_us, block_until_us, hold_until_us, last_inc_us, win_start_us, cur_ok,
--           prev_ok, created_us, learned_qps, learned_until_us, mark, cs_us (the cycle's
--           start), cok (its successes), be (the burst estimate, -1: none), r0 (the rate at the
--           cycle's start), bucket_fit (0/1), cyc (4 pairs S, f_us), cyc_n, sendq (16 pairs
--           t_us, rate), sendq_n (one GET and one SET ... PX)
-- ARGV[1]   now_us: integer µs, or '' to use the server clock (TIME)
-- then      per call, 17 fields: <key index (1-based)> <op> <weight> <ok> <max_wait_us>
--           <throttled> <block_us> <learned_qps> <learned_ttl_us> <max_qps> <min_qps>
--           <start_qps> <inc_abs> <inc_rel> <decrease> <burst> <sent_ago_us> (how long ago
--           the latest of the calls whose successes `ok` tells was sent; a throttled report's
--           max_wait_us: how long ago its call was sent, -1: unknown); op (the kind's operation codes,
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
local FAST = 0.25
local CYCLES, SENDQ, SENDQ_DT, SENDQ_KEEP = 4, 16, 100000, 3 * SECOND
local RECORD = 17 + 2 * CYCLES + 1 + 2 * SENDQ + 1
local FORMAT = '<' .. string.rep('d', RECORD)
local FIT_GAP, FIT_GAP_CALLS, FIT_WINDOW, CLIMBED, HI_SERVED = 0.25, 50, 0.2, 1.1, 1.2

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
  if wrong_type(v) or (v and #v ~= 8 * RECORD) then
    out[n + 1], out[n + 2], out[n + 3], out[n + 4] = -2, 0, 0, 0
  else
    local rate, tail, buntil, huntil, linc, wstart, cur, prev, created, lqps, luntil, mark = 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
    local cs, cok, be, r0, bfit = 0, 0, 0, 0, 0
    -- cyc: S1, f1, ... (oldest first); sendq: t1, r1, ... (oldest first)
    local cyc, cyc_n, sq, sq_n = {}, 0, {}, 0
    if v then
      local r = { struct.unpack(FORMAT, v) }
      rate, tail, buntil, huntil, linc, wstart, cur, prev, created, lqps, luntil, mark = unpack(r, 1, 12)
      cs, cok, be, r0, bfit = unpack(r, 13, 17)
      for j = 1, 2 * CYCLES do cyc[j] = r[17 + j] end
      cyc_n = r[18 + 2 * CYCLES]
      for j = 1, 2 * SENDQ do sq[j] = r[18 + 2 * CYCLES + j] end
      sq_n = r[RECORD]
    end
    if not (rate > 0) then
      rate, tail, buntil, huntil, linc, wstart, cur, prev, created, lqps, luntil, mark = start_qps, 0, 0, 0, now, now, 0, 0, now, 0, 0, 0
      cs, cok, be, r0, bfit = now, 0, -1, start_qps, 0
      cyc, cyc_n, sq, sq_n = {}, 0, { now, start_qps }, 1
      for j = 1, 2 * CYCLES do cyc[j] = 0 end
      for j = 3, 2 * SENDQ do sq[j] = 0 end
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
    -- the cycle's when their call was sent in it; they count and, outside a back-off period
    -- and a plateau, raise the rate by their share of a second's climb while it is at most
    -- INC_CAP times what is served while calls flow
    local function count_ok()
      if ok <= 0 then return end
      if now - sent_ago >= cs then cok = cok + ok end
      cur = cur + ok
      local flowing = now - math.max(huntil, created)
      if flowing < WINDOW / 10 then flowing = WINDOW / 10 elseif flowing > WINDOW then flowing = WINDOW end
      if now >= huntil and now >= linc and rate < INC_CAP * (served() * WINDOW / flowing) then
        local rel = inc_rel
        if mark <= 0 or rate < 0.9 * mark then rel = FAST end
        rate = rate + (inc_abs + rate * rel) * math.min(ok / rate, 1)
      end
    end
    -- the cycles (see src/core/adaptive/cycle.rs): the queue's rate history, the fit of two
    -- cycles, and the cycle a throttled answer ends
    local function shift(t, len)
      for j = 1, len - 2 do t[j] = t[j + 2] end
      t[len - 1], t[len] = 0, 0
    end
    local function send_rate(t)
      for j = sq_n, 1, -1 do
        if sq[2 * j - 1] <= t then return sq[2 * j] end
      end
      return sq[2]
    end
    local function hand_out(t)
      if sq_n == 0 then
        sq[1], sq[2], sq_n = t, rate, 1
        return
      end
      local last_t, last_r = sq[2 * sq_n - 1], sq[2 * sq_n]
      if last_r ~= rate then
        if sq_n > 1 and t - last_t < SENDQ_DT then
          sq[2 * sq_n] = rate
        else
          if sq_n == SENDQ then
            shift(sq, 2 * SENDQ)
            sq_n = sq_n - 1
          end
          sq[2 * sq_n + 1], sq[2 * sq_n + 2] = math.max(t, last_t), rate
          sq_n = sq_n + 1
        end
      end
      while sq_n > 2 and sq[3] < now - SENDQ_KEEP do
        shift(sq, 2 * SENDQ)
        sq_n = sq_n - 1
      end
    end
    local function push_cycle(S, f)
      if cyc_n == CYCLES then
        shift(cyc, 2 * CYCLES)
        cyc_n = cyc_n - 1
      end
      cyc[2 * cyc_n + 1], cyc[2 * cyc_n + 2] = S, f
      cyc_n = cyc_n + 1
    end
    -- 'window', 'bucket' and its burst, or nil
    local function fit(S, f)
      for j = cyc_n, 1, -1 do
        local cS, cf = cyc[2 * j - 1], cyc[2 * j]
        local mean = (S + cS) / (f + cf) * SECOND
        local apart = math.abs(f - cf) >= FIT_GAP * math.max(f, cf)
        if apart or not (math.abs(f - cf) / SECOND * mean < FIT_GAP_CALLS) then
          local r = (S - cS) / (f - cf) * SECOND
          if r < FIT_WINDOW * mean then return 'window' end
          local b = S - r * f / SECOND
          if b < -0.1 * S then return nil end
          return 'bucket', math.max(b, 0)
        end
      end
      return nil
    end
    local function end_cycle(sv, t_ago)
      local send_t = now
      if t_ago >= 0 then send_t = now - t_ago end
      local S = cok
      local plateau = 0
      if be < 0 then
        be = S
        push_cycle(S, math.max(send_t - cs, 0))
        mark = 0
        rate = math.min(math.max(math.sqrt(sv * rate), rate / BLIND), rate * 0.5)
      else
        local block_t = math.max(huntil - cs, 0)
        local f = send_t - math.max(huntil, cs)
        local lower = S / math.max(block_t + math.max(f, 0), 1) * SECOND
        local corrected = 0
        if f > 0 then corrected = (S - be) / f * SECOND end
        local window = false
        if f > 0 then
          local kind, b = fit(S, f)
          if kind == 'window' then
            bfit, window, corrected = 0, true, 0
          elseif kind == 'bucket' then
            bfit = 1
            be = math.min(be, b)
            corrected = (S - be) / f * SECOND
          end
          push_cycle(S, f)
        end
        if f > 0 and not window and corrected > 0 then corrected = corrected + 1 / f * SECOND end
        local short = f < math.max(0.2 * SECOND, 4 * SECOND / rate)
        local last = sv
        if not window and bfit == 1 then last = math.max(last - be, 0) end
        local hi = 0
        if f >= SECOND and rate >= CLIMBED * r0 and not window then hi = math.min(send_rate(send_t), HI_SERVED * sv) end
        local est = rate
        if not short then est = math.max(lower, corrected, last, hi) end
        mark = math.min(rate, est)
        rate = mark * (1 - decrease)
        plateau = PLATEAU
        if short and sv * BLIND < mark then
          -- too short to measure, and a burst served, the rest refused: the geometric middle
          mark = 0
          rate = math.min(math.max(math.sqrt(sv * est), est / BLIND), est * 0.5)
          plateau = 0
        end
      end
      cs, cok, r0 = now, 0, rate
      return plateau
    end
    local r1, r3 = 0, 0
    if op == 0 then
      count_ok()
      clamp()
      -- once the upstream's burst is estimated, a slot uses no more of it than that, less one
      local b = burst
      if be >= 0 then b = math.min(burst, math.max(be - 1, 0)) end
      local start = math.max(tail, now - b * SECOND / rate, buntil)
      r1 = start - now
      if r1 < 0 then r1 = 0 end
      if max_wait >= 0 and r1 > max_wait then
        r3 = 0
      else
        tail = start + weight * SECOND / rate
        hand_out(start)
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
        else
          -- no stated limit: the throttled answer ends a cycle
          plateau = end_cycle(sv, max_wait)
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
    local rec = { rate, tail, buntil, huntil, linc, wstart, cur, prev, created, lqps, luntil, mark, cs, cok, be, r0, bfit }
    for j = 1, 2 * CYCLES do rec[17 + j] = cyc[j] end
    rec[18 + 2 * CYCLES] = cyc_n
    for j = 1, 2 * SENDQ do rec[18 + 2 * CYCLES + j] = sq[j] end
    rec[RECORD] = sq_n
    redis.call('SET', key, struct.pack(FORMAT, unpack(rec, 1, RECORD)), 'PX', string.format('%d', px))
    local r4 = buntil - now
    if r4 < 0 then r4 = 0 end
    out[n + 1], out[n + 2], out[n + 3], out[n + 4] = math.ceil(r1), math.floor(rate * 1000), r3, math.ceil(r4)
  end
  n = n + 4
end
return out
