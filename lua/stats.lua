-- stats.lua: writes and reads limiter statistics (lib/stats.js), a list of operations in order.
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
--   registry KEYS[a] (a sorted set: member = '<kind>:<name>', score = last use, ms) and KEYS[b]
--           (a hash: member -> options JSON): <ttl_ms> <cap> then <member> <last use> <json>
--           triples (json '' keeps the options stored); a score only moves forward (GT); beyond
--           <cap> members the least recently used go, with their options; both keys PEXPIRE;
--           replies with the members that went (the writer deletes their statistics hashes,
--           which live in other slots)
--   del     KEYS[a]: DEL (a statistics hash whose registry member went)
--   hgetall KEYS[a]: its fields and values
--   since   KEYS[a] (the sorted set) and KEYS[b] (the hash): <min score>: the members used at or
--           after it, each as <member> <score> <options json>
-- Returns   one array per operation (empty for writes); { 'WRONGTYPE' } for an operation one of
--           whose keys holds another type (another writer under sluice's prefix): that operation
--           is skipped, nothing of it written, and the others run (no other reply has length 1:
--           hgetall's is even, since's a multiple of 3, a registry's members hold a colon)
-- Notes     every key written gets a TTL; all KEYS share one hash slot (the caller groups).

-- the counters, in lib/stats.js' ALL_FIELDS order (FIELDS, then the EXTRA_FIELDS some kinds count)
local FIELDS = {
  'admitted', 'refused', 'admittedWeight', 'refusedWeight', 'nearLimit', 'waited', 'waitTimeMs',
  'degraded', 'rescheduled', 'throttled', 'blocks',
}

-- the type each operation's keys must have (or none: not there yet), checked by a read of that
-- type (a WRONGTYPE error when the key holds another): commands the documented ACL allows;
-- an incr's first write is its test (see below)
local TYPES = {
  incr = { 'hash' }, del = { 'hash' }, hgetall = { 'hash' },
  registry = { 'zset', 'hash' }, since = { 'zset', 'hash' },
}
local function holds(key, t)
  local r
  if t == 'hash' then r = redis.pcall('HGET', key, 'admitted') else r = redis.pcall('ZSCORE', key, '') end
  if type(r) == 'table' and r.err then
    if string.sub(r.err, 1, 10) ~= 'WRONGTYPE ' then error(r) end
    return false
  end
  return true
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
          if type(r) == 'table' and r.err then
            if string.sub(r.err, 1, 10) ~= 'WRONGTYPE ' then error(r) end
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
    local ttl, cap = ARGV[a], tonumber(ARGV[a + 1])
    -- one ZADD and one HSET per 500 members (not a command per member)
    local scores, jsons, ns, nj = {}, {}, 0, 0
    local function send()
      if ns > 0 then redis.call('ZADD', keys[1], 'GT', unpack(scores, 1, ns)) end
      if nj > 0 then redis.call('HSET', keys[2], unpack(jsons, 1, nj)) end
      ns, nj = 0, 0
    end
    for j = a + 2, a + nargs - 1, 3 do
      scores[ns + 1], scores[ns + 2] = ARGV[j + 1], ARGV[j]
      ns = ns + 2
      if ARGV[j + 2] ~= '' then
        jsons[nj + 1], jsons[nj + 2] = ARGV[j], ARGV[j + 2]
        nj = nj + 2
      end
      if ns >= 1000 then send() end
    end
    send()
    local over = redis.call('ZCARD', keys[1]) - cap
    if over > 0 then
      local gone = redis.call('ZRANGE', keys[1], 0, over - 1)
      for from = 1, #gone, 1000 do
        local to = math.min(from + 999, #gone)
        redis.call('ZREM', keys[1], unpack(gone, from, to))
        redis.call('HDEL', keys[2], unpack(gone, from, to))
      end
      reply = gone
    end
    redis.call('PEXPIRE', keys[1], ttl)
    redis.call('PEXPIRE', keys[2], ttl)
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
  else
    error('stats: unknown operation')
  end
  out[#out + 1] = reply
end
return out
