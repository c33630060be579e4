package redis

import goredis "github.com/redis/go-redis/v9"

// The scripts below run atomically in Redis: each operation of the store
// is one of them, one round trip, with no lock held between calls. Times
// are Unix milliseconds from the caller's clock.

// pauseScript: KEYS[1] the pause; ARGV[1] its end. The later end wins, and
// the key expires at it.
var pauseScript = goredis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local untilms = tonumber(ARGV[1])
if untilms > cur then
  redis.call('SET', KEYS[1], untilms, 'PXAT', untilms)
end
return 1
`)

// gcraTakeLua is the take of a GCRA token bucket that reserves:
// take(key, interval, burst, maxwait, n) takes n tokens from the bucket
// whose theoretical arrival time (TAT), in seconds since 2017 on Redis's
// clock, as redis_rate keeps it, is at key, one token every interval
// seconds, burst at most, for a caller that may wait maxwait seconds.
// Tokens that come within that wait are taken, the TAT moved past them;
// tokens that do not take nothing. It returns the wait (0: now; negated
// when nothing was taken) and the tokens the bucket holds after. The key
// expires when the bucket is full again.
const gcraTakeLua = `
redis.replicate_commands()
local function take(key, interval, burst, maxwait, n)
  local t = redis.call('TIME')
  local now = (t[1] - 1483228800) + t[2] / 1000000
  local tat = math.max(tonumber(redis.call('GET', key) or '0'), now)
  local newtat = tat + n * interval
  local wait = math.max(newtat - burst * interval - now, 0)
  if wait > maxwait then
    return -wait, burst - (tat - now) / interval
  end
  local ttl = math.ceil((newtat - now) * 1000)
  if ttl > 0 then
    redis.call('SET', key, newtat, 'PX', ttl)
  end
  return wait, burst - (newtat - now) / interval
end
`

// takeArgsLua reads a take's arguments as the bucket scripts get them:
// KEYS[1] the TAT; ARGV the seconds per token, the burst, the most the
// caller may wait in seconds, the tokens to take.
const takeArgsLua = `KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])`

// takeScript takes from the bucket (gcraTakeLua) and answers the wait.
var takeScript = goredis.NewScript(gcraTakeLua + `
local wait = take(` + takeArgsLua + `)
return tostring(wait)
`)

// tokensScript reads the bucket takeScript keeps, writing nothing: KEYS[1]
// its TAT; ARGV the seconds per token, the burst. The answer is the tokens
// it holds now on Redis's clock: the burst, less a token for each interval
// the TAT is ahead of now (below 0 while tokens are reserved ahead). A
// bucket with no key is full.
var tokensScript = goredis.NewScript(`
local interval, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = (t[1] - 1483228800) + t[2] / 1000000
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
return tostring(burst - math.max(tat - now, 0) / interval)
`)

// The breaker's keys: KEYS[1] a hash (open, until, level, since: when it
// last opened, closed: when a probe last closed it, probe: when the probe
// granted ends, probes: a count naming each, prober: the name of the one
// granted, cstatus, cclass, cdetail: what tripped it, fgen: the failures
// counted ever while closed), KEYS[2] the
// consecutive failures, KEYS[3] the failures in the window, a sorted set
// scored by their time. Every script but the read answers {state, until,
// level, probe, failures}, state 0 closed, 1 half-open, 2 open; the
// admission of a probe adds its name.

// breakerAdmitLua is a breaker's admission: admitBreaker(hash, failures,
// now, probe timeout, succeeded) answers as the breaker scripts do, and,
// closed, with the failures counted ever (fgen) too. Half-open, the first
// to ask is the probe until the timeout, or until it is released.
// succeeded, when not 0, is a success told late (store.AdmitAsk): it
// clears the failures when fgen reached it.
const breakerAdmitLua = `
local function admitBreaker(hkey, fkey, now, probeTimeout, succeeded)
  local h = redis.call('HMGET', hkey, 'open', 'until', 'level', 'probe', 'fgen')
  local level = tonumber(h[3] or '0')
  if h[1] ~= '1' then
    local fgen = tonumber(h[5] or '0')
    if succeeded > 0 and fgen >= succeeded then
      redis.call('DEL', fkey)
    end
    return {0, 0, level, 0, tonumber(redis.call('GET', fkey) or '0'), 0, fgen}
  end
  local untilms = tonumber(h[2])
  if now < untilms then
    return {2, untilms, level, 0, 0}
  end
  if now < tonumber(h[4] or '0') then
    return {1, untilms, level, 0, 0}
  end
  local id = redis.call('HINCRBY', hkey, 'probes', 1)
  redis.call('HSET', hkey, 'probe', now + probeTimeout, 'prober', id)
  return {1, untilms, level, 1, 0, id}
end
`

// breakerAdmitScript: ARGV now, probe timeout.
var breakerAdmitScript = goredis.NewScript(breakerAdmitLua + `
return admitBreaker(KEYS[1], KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2]), 0)
`)

// admitScript answers an attempt's questions together: KEYS the
// breaker's hash and failures, the pause, the bucket's TAT, the learned
// pace's hash; ARGV now, the probe timeout, whether the breaker, the
// pause, the bucket and the learned pace are asked (0/1 each), then the
// bucket's seconds per token, burst and tokens to take, a success told
// late (admitBreaker's succeeded), then learn's arguments (learnLua). The bucket gives its tokens, and the learned pace
// its turn, only when they are there now, and when the breaker lets the
// request go (closed, or the probe granted to it) and the pause is over.
// The answer is the breaker's (5 or 6 values, or {} when not asked), the
// pause's end (0 for none), the take's wait as a string, empty when not
// asked, and learn's answer, {} when not asked.
var admitScript = goredis.NewScript(gcraTakeLua + breakerAdmitLua + learnLua + `
local now = tonumber(ARGV[1])
local goes = true
local breaker = {}
if ARGV[3] == '1' then
  breaker = admitBreaker(KEYS[1], KEYS[2], now, tonumber(ARGV[2]), tonumber(ARGV[10]))
  goes = breaker[1] == 0 or breaker[4] == 1
end
local paused = 0
if ARGV[4] == '1' then
  paused = tonumber(redis.call('GET', KEYS[3]) or '0')
  goes = goes and paused <= now
end
local wait = ''
if ARGV[5] == '1' and goes then
  local w = take(KEYS[4], tonumber(ARGV[7]), tonumber(ARGV[8]), 0, tonumber(ARGV[9]))
  wait = tostring(w)
  goes = w <= 0
end
local learned = {}
if ARGV[6] == '1' and goes then
  learned = learn(KEYS[5], ARGV, 11)
end
return {breaker, paused, wait, learned}
`)

// breakerReleaseScript: ARGV the probe's name. The probe is given back
// if it is still that one's; the hash keeps its expiry.
var breakerReleaseScript = goredis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'open', 'prober')
if h[1] == '1' and h[2] == ARGV[1] then
  redis.call('HSET', KEYS[1], 'probe', 0)
end
return 1
`)

// tripLua opens the breaker at lvl for its cooldown: cooldowns are ARGV
// from index first on; cs, cc, cd say what tripped it. The hash outlives
// the open by the decay of its level, so that an escalation is
// remembered and then forgotten.
const tripLua = `
local function trip(now, lvl, first, decay, probeTimeout, cs, cc, cd)
  local untilms = now + tonumber(ARGV[first + lvl])
  redis.call('HSET', KEYS[1], 'open', 1, 'until', untilms, 'level', lvl, 'since', now, 'probe', 0,
    'cstatus', cs, 'cclass', cc, 'cdetail', cd)
  redis.call('PEXPIREAT', KEYS[1], untilms + probeTimeout + decay * (lvl + 1))
  redis.call('DEL', KEYS[2], KEYS[3])
  return {2, untilms, lvl, 0, 0}
end
local function decayed(h, now, decay)
  local level = tonumber(h[3] or '0')
  if level > 0 and decay > 0 then
    level = math.max(level - math.floor((now - tonumber(h[4] or now)) / decay), 0)
  end
  return level
end
`

// breakerReadScript: ARGV now, decay ms. It answers {state, until,
// level, failures, since, cause status, cause class, cause detail} and
// changes nothing.
var breakerReadScript = goredis.NewScript(tripLua + `
local h = redis.call('HMGET', KEYS[1], 'open', 'until', 'level', 'since', 'cstatus', 'cclass', 'cdetail')
local now = tonumber(ARGV[1])
local state, untilms, level = 0, 0, decayed(h, now, tonumber(ARGV[2]))
if h[1] == '1' then
  untilms, level, state = tonumber(h[2]), tonumber(h[3]), 1
  if now < untilms then
    state = 2
  end
end
return {state, untilms, level, tonumber(redis.call('GET', KEYS[2]) or '0'), tonumber(h[4] or '0'),
  tonumber(h[5] or '0'), tonumber(h[6] or '0'), h[7] or ''}
`)

// breakerFailedScript: ARGV now, probe (0/1), consecutive limit, window
// limit (0: none), window ms, failures ttl ms, decay ms, probe timeout ms,
// a name for the failure unique in the window, the retrip window ms (0:
// none), the cause's status, class and detail, then the cooldowns of each
// level. The window slides: the failures of the last window ms count. A
// trip within the retrip window of the last closing goes a level up.
var breakerFailedScript = goredis.NewScript(tripLua + `
local now = tonumber(ARGV[1])
local decay, probeTimeout = tonumber(ARGV[7]), tonumber(ARGV[8])
local cs, cc, cd = ARGV[11], ARGV[12], ARGV[13]
local levels = #ARGV - 13
local h = redis.call('HMGET', KEYS[1], 'open', 'until', 'level', 'since', 'closed')
if h[1] == '1' then
  local untilms = tonumber(h[2])
  if now < untilms then
    return {2, untilms, tonumber(h[3]), 0, 0}
  end
  if ARGV[2] == '1' then
    return trip(now, math.min(decayed(h, now, decay) + 1, levels - 1), 14, decay, probeTimeout, cs, cc, cd)
  end
  return {1, untilms, tonumber(h[3]), 0, 0}
end
local c = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[6]))
redis.call('HINCRBY', KEYS[1], 'fgen', 1)
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[6]) then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[6]))
end
local w = 0
local windowLimit = tonumber(ARGV[4])
if windowLimit > 0 then
  local windowms = tonumber(ARGV[5])
  redis.call('ZADD', KEYS[3], now, ARGV[9])
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - windowms)
  w = redis.call('ZCARD', KEYS[3])
  redis.call('PEXPIRE', KEYS[3], windowms)
end
if c >= tonumber(ARGV[3]) or (windowLimit > 0 and w >= windowLimit) then
  local lvl = decayed(h, now, decay)
  local closed = tonumber(h[5] or '0')
  if closed > 0 and now - closed < tonumber(ARGV[10]) then
    lvl = lvl + 1
  end
  return trip(now, math.min(lvl, levels - 1), 14, decay, probeTimeout, cs, cc, cd)
end
return {0, 0, decayed(h, now, decay), 0, c}
`)

// breakerSucceededScript: ARGV now, probe (0/1), retrip window ms. The
// failures are cleared; a probe's success closes the breaker, its level
// kept to decay, and the hash kept at least the retrip window, which a
// trip within escalates.
var breakerSucceededScript = goredis.NewScript(`
redis.call('DEL', KEYS[2])
if ARGV[2] == '1' then
  local h = redis.call('HMGET', KEYS[1], 'open', 'until')
  if h[1] == '1' and tonumber(ARGV[1]) >= tonumber(h[2]) then
    redis.call('HSET', KEYS[1], 'open', 0, 'probe', 0, 'closed', ARGV[1])
    local retrip = tonumber(ARGV[3])
    if retrip > 0 and redis.call('PTTL', KEYS[1]) < retrip then
      redis.call('PEXPIRE', KEYS[1], retrip)
    end
  end
end
return 1
`)

// breakerTrippedScript: ARGV now, until, level, decay ms, probe timeout
// ms, when it opened (0: now), the cause's status, class and detail. A
// transport's own breaker opened: the shared one opens too, the later
// end and the higher level winning.
var breakerTrippedScript = goredis.NewScript(tripLua + `
local now, untilms, level = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local decay, probeTimeout = tonumber(ARGV[4]), tonumber(ARGV[5])
local since = tonumber(ARGV[6])
if since <= 0 then
  since = now
end
local h = redis.call('HMGET', KEYS[1], 'open', 'until', 'level', 'since')
if h[1] == '1' and tonumber(h[2]) >= untilms then
  return {2, tonumber(h[2]), tonumber(h[3]), 0, 0}
end
level = math.max(level, decayed(h, now, decay))
redis.call('HSET', KEYS[1], 'open', 1, 'until', untilms, 'level', level, 'since', since, 'probe', 0,
  'cstatus', ARGV[7], 'cclass', ARGV[8], 'cdetail', ARGV[9])
redis.call('PEXPIREAT', KEYS[1], untilms + probeTimeout + decay * (level + 1))
redis.call('DEL', KEYS[2], KEYS[3])
return {2, untilms, level, 0, 0}
`)
