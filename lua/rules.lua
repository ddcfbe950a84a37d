-- rules.lua: the store's rules (lib/store/rules, ../shared/DESIGN.md §9): operator rules that
-- every process caches, their version, a log of recent changes, the operators' history.
--
-- KEYS      [1] the table (a hash: target id -> the rule as JSON), [2] its version (a counter),
--           [3] the log (a list, newest first: '<version> <target id>'), [4] the history (a list,
--           newest first: the writer's JSON of each change), [5] the rules' ends (a sorted set:
--           target id by epoch ms), [6] the doors' bans (a hash: ban id '["b",<door>,<key>]' ->
--           '{"until":<epoch ms>}'), [7] their ends (a sorted set: ban id by epoch ms). All in
--           one hash slot (one tag). Bans are told and logged as changes like rules (one
--           version), never kept in the history nor counted against <max rules>.
-- ARGV[1]   the operation; then its arguments:
--   set     <now ms> <ttl ms> <log cap> <channel> <id> <rule json> <expires at ms or ''>
--           <history json> <max rules>: HSET the rule (its end in KEYS[5]); replies { version },
--           or { 'FULL' } (nothing written) when the table holds <max rules> others
--   delete  <now ms> <ttl ms> <log cap> <channel> <id> <history json>: replies { version, 1 } or
--           { version, 0 } (there was no such rule; nothing written)
--   since   <version>: the changes after it: { version } when none, { version, 'changes', id,
--           json or '' (deleted), ... } when the log holds them all, else { version, 'all', id,
--           json, ... } (the whole table and the bans; also for <version> -1). Reads only.
--   ban     <now ms> <ttl ms> <log cap> <channel> <id> <until ms> <max bans>: bans the client
--           until <until ms> (a longer ban in place is kept: { version, 0 }, nothing written),
--           first dropping the bans ended by <now ms> (not told: every process ends them on its
--           own clock); past <max bans> the bans ending first go, each told as a change.
--           Replies { version, 1 }
--   unban   <now ms> <ttl ms> <log cap> <channel> <id>: lifts the ban: { version, 1 }, or
--           { version, 0 } when there was none (nothing written)
--   history <count>: the newest <count> history entries
--   renew   <ttl ms>: PEXPIRE every key that exists (a daily renewal by any connected process)
-- Returns   per operation as said above: strings and integers, or { 'WRONGTYPE' } for a write when
--           one of KEYS holds another type (another writer under sluice's prefix; nothing written)
-- Notes     a write (set, delete) first drops the rules whose end is at or before <now ms>, each
--           logged as a change; bumps the version once per change, logs each (keeping <log cap>),
--           keeps the last 1,000 history entries and PEXPIREs every key by <ttl ms>; each change
--           is PUBLISHed on <channel> with the rule it leaves (see `changed`), so a process that
--           holds the version before it applies it with no read.

-- @include wrong_type

local HISTORY = 1000
local tbl, ver, log, hist, ends, bans, bends = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local op = ARGV[1]

-- one change: the version bumped, logged, and told on the channel with the target's rule now
-- ('' when it has none): 'rules <version>\n<id>\n<rule json>' (an id and a rule are JSON: no
-- raw newline in either)
local function changed(channel, id, json)
  local v = redis.call('INCR', ver)
  redis.call('LPUSH', log, v .. ' ' .. id)
  redis.call('PUBLISH', channel, 'rules ' .. v .. '\n' .. id .. '\n' .. json)
  return v
end

local function written(ttl, cap)
  redis.call('LTRIM', log, 0, cap - 1)
  redis.call('LTRIM', hist, 0, HISTORY - 1)
  for k = 1, 5 do redis.call('PEXPIRE', KEYS[k], ttl) end
end

-- drops the rules that ended by `now`, each a change; the version after them
local function sweep(now, channel)
  local gone = redis.call('ZRANGEBYSCORE', ends, '-inf', now)
  for _, id in ipairs(gone) do
    redis.call('HDEL', tbl, id)
    redis.call('ZREM', ends, id)
    changed(channel, id, '')
  end
  return tonumber(redis.call('GET', ver) or '0'), #gone
end

local function whole(v)
  local out = { v, 'all' }
  local all = redis.call('HGETALL', tbl)
  for j = 1, #all do out[#out + 1] = all[j] end
  all = redis.call('HGETALL', bans)
  for j = 1, #all do out[#out + 1] = all[j] end
  return out
end

-- a ban's id: a JSON array whose first element is "b" (a rule's is another letter)
local function is_ban(id)
  return string.sub(id, 1, 5) == '["b",'
end

-- the bans' keys live as long as the last ban, plus a minute
local function bans_expire(now)
  local last = redis.call('ZRANGE', bends, -1, -1, 'WITHSCORES')
  if #last == 0 then return end
  local px = tonumber(last[2]) - now + 60000
  if px < 1000 then px = 1000 end
  redis.call('PEXPIRE', bans, string.format('%d', px))
  redis.call('PEXPIRE', bends, string.format('%d', px))
end

if op == 'set' or op == 'delete' then
  -- a key of another type under the table's names: another writer uses sluice's prefix
  if wrong_type(redis.pcall('HLEN', tbl)) or wrong_type(redis.pcall('LLEN', log))
    or wrong_type(redis.pcall('LLEN', hist)) or wrong_type(redis.pcall('ZCARD', ends)) then
    return { 'WRONGTYPE' }
  end
  local now, ttl, cap, channel, id = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
  local v, swept = sweep(now, channel)
  if op == 'set' then
    local json, ends_at, entry, max = ARGV[7], ARGV[8], ARGV[9], tonumber(ARGV[10])
    if redis.call('HEXISTS', tbl, id) == 0 and redis.call('HLEN', tbl) >= max then
      if swept > 0 then written(ttl, cap) end
      return { 'FULL' }
    end
    redis.call('HSET', tbl, id, json)
    if ends_at == '' then redis.call('ZREM', ends, id) else redis.call('ZADD', ends, ends_at, id) end
    v = changed(channel, id, json)
    redis.call('LPUSH', hist, entry)
    written(ttl, cap)
    return { v }
  end
  local entry = ARGV[7]
  if redis.call('HDEL', tbl, id) == 0 then
    if swept > 0 then written(ttl, cap) end
    return { v, 0 }
  end
  redis.call('ZREM', ends, id)
  v = changed(channel, id, '')
  redis.call('LPUSH', hist, entry)
  written(ttl, cap)
  return { v, 1 }
elseif op == 'ban' or op == 'unban' then
  if wrong_type(redis.pcall('HLEN', bans)) or wrong_type(redis.pcall('ZCARD', bends))
    or wrong_type(redis.pcall('LLEN', log)) then
    return { 'WRONGTYPE' }
  end
  local now, ttl, cap, channel, id = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
  local v = tonumber(redis.call('GET', ver) or '0')
  if op == 'unban' then
    if redis.call('HDEL', bans, id) == 0 then return { v, 0 } end
    redis.call('ZREM', bends, id)
    v = changed(channel, id, '')
  else
    local untl, max = tonumber(ARGV[7]), tonumber(ARGV[8])
    for _, gone in ipairs(redis.call('ZRANGEBYSCORE', bends, '-inf', now)) do
      redis.call('HDEL', bans, gone)
      redis.call('ZREM', bends, gone)
    end
    local held = tonumber(redis.call('ZSCORE', bends, id))
    if held and held >= untl then return { v, 0 } end
    local json = '{"until":' .. string.format('%d', untl) .. '}'
    redis.call('HSET', bans, id, json)
    redis.call('ZADD', bends, untl, id)
    v = changed(channel, id, json)
    -- past the bound, the bans ending first go (a flood of clients never grows the table)
    local over = redis.call('ZCARD', bends) - max
    if over > 0 then
      for _, gone in ipairs(redis.call('ZRANGE', bends, 0, over - 1)) do
        redis.call('HDEL', bans, gone)
        redis.call('ZREM', bends, gone)
        v = changed(channel, gone, '')
      end
    end
  end
  redis.call('LTRIM', log, 0, cap - 1)
  redis.call('PEXPIRE', ver, ttl)
  redis.call('PEXPIRE', log, ttl)
  bans_expire(now)
  return { v, 1 }
elseif op == 'since' then
  local mine = tonumber(ARGV[2])
  local v = tonumber(redis.pcall('GET', ver)) or 0
  if mine == v then return { v } end
  if mine < 0 or mine > v then return whole(v) end
  local entries = redis.call('LRANGE', log, 0, v - mine - 1)
  -- the log must reach back to the change after `mine`
  if #entries < v - mine or tonumber(string.match(entries[#entries], '^(%d+) ')) ~= mine + 1 then
    return whole(v)
  end
  local out, seen = { v, 'changes' }, {}
  for j = #entries, 1, -1 do
    local id = string.match(entries[j], '^%d+ (.*)$')
    if not seen[id] then
      seen[id] = true
      out[#out + 1] = id
      if is_ban(id) then
        out[#out + 1] = redis.call('HGET', bans, id) or ''
      else
        out[#out + 1] = redis.call('HGET', tbl, id) or ''
      end
    end
  end
  return out
elseif op == 'history' then
  return redis.call('LRANGE', hist, 0, tonumber(ARGV[2]) - 1)
elseif op == 'renew' then
  for k = 1, 5 do
    if redis.call('EXISTS', KEYS[k]) == 1 then redis.call('PEXPIRE', KEYS[k], ARGV[2]) end
  end
  return {}
end
error('rules: unknown operation')
