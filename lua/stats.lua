-- stats.lua: writes and reads limiter statistics (lib/store/stats.js), a list of operations in order.
--
-- ARGV      per operation: <op> <key count> <key index (1-based)>... <arg count> <arg>...
--   incr    KEYS[a] (a hash): one argument, comma-separated: <ttl_ms>,<slot>,<minute>, then the
--           counts in FIELDS order (empty for 0; every part a number the writer made, never a
--           name): HINCRBY each (HINCRBYFLOAT for a fraction), then PEXPIRE unless ttl_ms is 0
--           (the writer gives the lifetime of the limiter's state, at least two flush
--           periods, so statistics leave with the limit they describe). <slot> (unless empty) keeps per-minute
--           admitted/refused counts for charts in a ring: fields t<slot> (the minute held),
--           a<slot>, r<slot>; a slot holding an older minute starts over with these counts.
--           (One packed argument per limiter: a flush of 10,000 limiters sends 50,000 parts,
--           not 150,000.)
--   registry KEYS[a] (a sorted set: member = '<kind>:<name>', score = last use, ms), KEYS[b]
--           (a hash: member -> options JSON), KEYS[c] and KEYS[d] (sorted sets as KEYS[a]: the
--           members on probation and the protected ones) and KEYS[e] (a hash: member ->
--           '<periods>,<since ms>'): <ttl_ms> <cap> <protected cap> <gap_ms> then <member>
--           <last use> <json> triples (json '' keeps the options stored). A score only moves
--           forward (GT). A member's record counts the periods it was used in: a last use at
--           least <gap_ms> after the period's start begins a new one. A member seen in one
--           period is on probation, in two or more protected; beyond <protected cap> the least
--           recently used protected go back to probation (as seen once); beyond <cap> members
--           the least recently used on probation go (with their options and record), protected
--           ones only when probation holds too few (members an older writer added to KEYS[a]
--           alone go as probation's). So a flood of names seen once evicts only such names.
--           Every key PEXPIREs; replies with the members that went (the writer deletes their
--           statistics hashes, which live in other slots)
--   del     KEYS[a]: DEL (a statistics hash whose registry member went)
--   hgetall KEYS[a]: its fields and values
--   since   KEYS[a] (the sorted set) and KEYS[b] (the hash): <min score>: the members used at or
--           after it, each as <member> <score> <options json>
--   lease   KEYS[a] (a sorted set: the tokens a limiter's processes hold on lease, member
--           '<process id>,<tokens>', score = when that holding ends, ms): <now ms> <ttl ms> <old
--           member> <new member>: ZREM old (unless ''), ZADD new at <now ms> + <ttl ms> (unless
--           ''), then the holdings ended by <now ms> go (a killed process's within its ttl), PEXPIRE
--   leases  KEYS[a] (as lease): <now ms>: the members of holdings not ended by then (every part a
--           number the writer made: the reader sums the tokens)
-- Returns   one array per operation (empty for writes); { 'WRONGTYPE' } for an operation one of
--           whose keys holds another type (another writer under sluice's prefix): that operation
--           is skipped, nothing of it written, and the others run (no other reply has length 1:
--           hgetall's is even, since's a multiple of 3, a registry's members hold a colon, leases' a comma)
-- Notes     every key written gets a TTL; all KEYS share one hash slot (the caller groups).

-- the counters, in lib/store/stats.js' ALL_FIELDS order (FIELDS, then the EXTRA_FIELDS some kinds count)
local FIELDS = {
  'admitted', 'refused', 'admittedWeight', 'refusedWeight', 'nearLimit', 'waited', 'waitTimeMs',
  'degraded', 'rescheduled', 'throttled', 'blocks', 'shadowRefused', 'denied', 'leaseCalls', 'returned',
}

-- the type each operation's keys must have (or none: not there yet), checked by a read of that
-- type (a WRONGTYPE error when the key holds another): commands the documented ACL allows;
-- an incr's first write is its test (see below)
local TYPES = {
  incr = { 'hash' }, del = { 'hash' }, hgetall = { 'hash' },
  registry = { 'zset', 'hash', 'zset', 'zset', 'hash' }, since = { 'zset', 'hash' },
  lease = { 'zset' }, leases = { 'zset' },
}
-- @include wrong_type
local function holds(key, t)
  if t == 'hash' then return not wrong_type(redis.pcall('HGET', key, 'admitted')) end
  return not wrong_type(redis.pcall('ZSCORE', key, ''))
end

-- the members of `list` (1-based, from..to) as arguments of `cmd` on `key` after `pre`, 1000 at a time
local function chunked(cmd, key, pre, list, n)
  for from = 1, n, 1000 do
    local to = math.min(from + 999, n)
    if pre then
      redis.call(cmd, key, pre, unpack(list, from, to))
    else
      redis.call(cmd, key, unpack(list, from, to))
    end
  end
end

-- the registry operation (see the header): writes the triples, keeps the caps; the members that went
local function registry(keys, a, nargs)
  local all, options, probation, protected, seen = keys[1], keys[2], keys[3], keys[4], keys[5]
  local ttl, cap, pcap, gap = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local scores, jsons, records, onp, onq, up = {}, {}, {}, {}, {}, {}
  for j = a + 4, a + nargs - 1, 3 do
    local member, last = ARGV[j], tonumber(ARGV[j + 1])
    local periods, since = 0, 0
    local rec = redis.call('HGET', seen, member)
    if rec then
      local p, s = string.match(rec, '^(%d+),(%-?%d+)$')
      periods, since = tonumber(p) or 0, tonumber(s) or 0
    end
    if periods == 0 then
      periods, since = 1, last
    elseif last >= since + gap then
      periods, since = math.min(periods + 1, 255), last
    end
    scores[#scores + 1], scores[#scores + 2] = ARGV[j + 1], member
    records[#records + 1], records[#records + 2] = member, periods .. ',' .. string.format('%d', since)
    if ARGV[j + 2] ~= '' then jsons[#jsons + 1], jsons[#jsons + 2] = member, ARGV[j + 2] end
    if periods >= 2 then
      onq[#onq + 1], onq[#onq + 2] = ARGV[j + 1], member
      up[#up + 1] = member
    else
      onp[#onp + 1], onp[#onp + 2] = ARGV[j + 1], member
    end
  end
  -- pairs go 500 at a time (1000 arguments); a member is in one segment
  chunked('ZADD', all, 'GT', scores, #scores)
  if #jsons > 0 then chunked('HSET', options, nil, jsons, #jsons) end
  chunked('HSET', seen, nil, records, #records)
  if #up > 0 then chunked('ZREM', probation, nil, up, #up) end
  if #onq > 0 then chunked('ZADD', protected, 'GT', onq, #onq) end
  if #onp > 0 then chunked('ZADD', probation, 'GT', onp, #onp) end
  -- protected beyond their cap: the least recently used go back to probation, as seen once
  local down = redis.call('ZCARD', protected) - pcap
  if down > 0 then
    local old = redis.call('ZRANGE', protected, 0, down - 1, 'WITHSCORES')
    local names, back, recs = {}, {}, {}
    for j = 1, #old, 2 do
      names[#names + 1] = old[j]
      back[#back + 1], back[#back + 2] = old[j + 1], old[j]
      recs[#recs + 1], recs[#recs + 2] = old[j], '1,' .. old[j + 1]
    end
    chunked('ZREM', protected, nil, names, #names)
    chunked('ZADD', probation, nil, back, #back)
    chunked('HSET', seen, nil, recs, #recs)
  end
  local gone = {}
  local over = redis.call('ZCARD', all) - cap
  if over > 0 then
    gone = redis.call('ZRANGE', probation, 0, over - 1)
    if #gone < over then
      -- probation holds too few (members of an older writer, in KEYS[a] alone): the least
      -- recently used of all that are not going already
      local going = {}
      for _, m in ipairs(gone) do going[m] = true end
      local more = redis.call('ZRANGE', all, 0, over - 1 + #gone)
      for _, m in ipairs(more) do
        if #gone >= over then break end
        if not going[m] then gone[#gone + 1] = m end
      end
    end
    chunked('ZREM', all, nil, gone, #gone)
    chunked('ZREM', probation, nil, gone, #gone)
    chunked('ZREM', protected, nil, gone, #gone)
    chunked('HDEL', options, nil, gone, #gone)
    chunked('HDEL', seen, nil, gone, #gone)
  end
  for k = 1, 5 do redis.call('PEXPIRE', keys[k], ttl) end
  return gone
end

local out = {}
local i = 1
local n = #ARGV
while i <= n do
  local op, nkeys = ARGV[i], tonumber(ARGV[i + 1])
  local keys = {}
  for k = 1, nkeys do keys[k] = KEYS[tonumber(ARGV[i + 1 + k])] end
  local nargs = tonumber(ARGV[i + 2 + nkeys])
  local a = i + 3 + nkeys -- first argument
  i = a + nargs
  local reply = {}
  local want = TYPES[op]
  if want == nil then error('stats: unknown operation') end
  local v
  if op == 'incr' then
    -- the type test of an incr is its first count's write, through redis.pcall (it writes
    -- nothing to a key of another type); only an incr without counts reads first
    v = {}
    for x in string.gmatch(ARGV[a] .. ',', '([^,]*),') do v[#v + 1] = x end
    local tested = false
    for f = 1, #FIELDS do
      local c = v[3 + f]
      if c ~= nil and c ~= '' then
        local cmd = 'HINCRBY'
        if string.find(c, '[.eE]') then cmd = 'HINCRBYFLOAT' end
        if tested then
          redis.call(cmd, keys[1], FIELDS[f], c)
        else
          local r = redis.pcall(cmd, keys[1], FIELDS[f], c)
          if wrong_type(r) then
            op = 'wrongtype'
            break
          end
          tested = true
        end
      end
    end
    if not tested and op == 'incr' and not holds(keys[1], 'hash') then op = 'wrongtype' end
  else
    for k = 1, #keys do
      if not holds(keys[k], want[k]) then op = 'wrongtype' end
    end
  end
  if op == 'wrongtype' then
    reply = { 'WRONGTYPE' }
  elseif op == 'incr' then
    local slot = v[2]
    if slot ~= '' then
      local admitted, refused = v[4] == '' and '0' or v[4], v[5] == '' and '0' or v[5]
      if redis.call('HGET', keys[1], 't' .. slot) == v[3] then
        if admitted ~= '0' then redis.call('HINCRBY', keys[1], 'a' .. slot, admitted) end
        if refused ~= '0' then redis.call('HINCRBY', keys[1], 'r' .. slot, refused) end
      else
        redis.call('HSET', keys[1], 't' .. slot, v[3], 'a' .. slot, admitted, 'r' .. slot, refused)
      end
    end
    if v[1] ~= '0' then redis.call('PEXPIRE', keys[1], v[1]) end
  elseif op == 'registry' then
    reply = registry(keys, a, nargs)
  elseif op == 'del' then
    redis.call('DEL', keys[1])
  elseif op == 'hgetall' then
    reply = redis.call('HGETALL', keys[1])
  elseif op == 'since' then
    local members = redis.call('ZRANGEBYSCORE', keys[1], ARGV[a], '+inf', 'WITHSCORES')
    for j = 1, #members, 2 do
      reply[#reply + 1] = members[j]
      reply[#reply + 1] = members[j + 1]
      reply[#reply + 1] = redis.call('HGET', keys[2], members[j]) or '{}'
    end
  elseif op == 'lease' then
    local now, ttl = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
    if ARGV[a + 2] ~= '' then redis.call('ZREM', keys[1], ARGV[a + 2]) end
    if ARGV[a + 3] ~= '' then redis.call('ZADD', keys[1], now + ttl, ARGV[a + 3]) end
    redis.call('ZREMRANGEBYSCORE', keys[1], '-inf', now)
    redis.call('PEXPIRE', keys[1], ttl)
  elseif op == 'leases' then
    reply = redis.call('ZRANGEBYSCORE', keys[1], '(' .. ARGV[a], '+inf')
  else
    error('stats: unknown operation')
  end
  out[#out + 1] = reply
end
return out
