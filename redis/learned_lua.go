package redis

import goredis "github.com/redis/go-redis/v9"

// learnLua is a key's learned pace shared by a fleet (store.Learned),
// the script of what ratewise's internal/learn.Shared does in Go, function
// by function, under the same names: ratewise.MemoryStore runs that one,
// and TestLearnMatchesTheReference holds the two to the same answers.
//
// learn(key, A, o): key is the key's hash, whose fields are Shared's:
// times in seconds since 2017 on Redis's clock (0 for none), durations in
// seconds. A from index o: now (0: Redis's clock; a test gives its own),
// take (0/1), the most the request may wait in seconds, the ceiling in
// requests a second (0: none), the hash's lifetime in ms, the number of
// outcomes, then each outcome's turn, kind, hint in seconds, passed,
// counted (0/1), remaining, limit, reset in seconds and reset due. A key
// that learned nothing keeps no hash: asking for its turn writes
// nothing. The answer is {paced, took, wait, seq, rate, tell, hints
// overstate, windowed, quota, held for, blind, rate now, counted}, the
// floats as strings. A script using it calls redis.replicate_commands()
// first. Its parts are in the files beside this one, as learn.Shared's
// are in Go.
const learnLua = learnLuaHead + learnLuaPace + learnLuaWindow + learnLuaRefusal + learnLuaCount + learnLuaTail

// learnLuaHead opens learn: its constants, its arguments, the key's
// state read (or, for a key that learned nothing, nothing kept).
const learnLuaHead = `
local F = {'mode', 'seq', 'tat', 'last', 'slack', 'prob', 'from', 'to', 'hold', 'band', 'succ', 'floor', 'atf',
  'cut', 'empty', 'eseq', 'sref', 'lhint', 'dry', 'dryf', 'dryt', 'notw', 'opens', 'quota', 'conf', 'fore',
  'wseq', 'opat', 'per', 'prb', 'held', 'aseq', 'auntil', 'bunt', 'bhold', 'pfirst', 'ppaced',
  'cnt', 'crem', 'clim', 'cseq', 'cat', 'creset', 'crst', 'crefl', 'cnob', 'cretry', 'cearly', 'ccut', 'copen',
  'creask', 'cper', 'cask', 'caskt', 'crefu', 'csat', 'csseq', 'csrefu', 'csrem', 'cnat', 'cnseq', 'cnrefu', 'cnrem',
  'csaw', 'cbef', 'crefb', 'ctold', 'crc', 'qfrom', 'qto', 'dryp', 'dsh', 'etgt', 'danc'}
local CF = {'cnt', 'crem', 'clim', 'cseq', 'cat', 'creset', 'crst', 'crefl', 'cnob', 'cretry', 'cearly', 'ccut',
  'copen', 'creask', 'cper', 'cask', 'caskt', 'crefu', 'csat', 'csseq', 'csrefu', 'csrem', 'cnat', 'cnseq', 'cnrefu',
  'cnrem', 'csaw', 'cbef', 'crefb', 'ctold', 'crc'}
local UNPACED, PACED, WINDOWED, BLIND = 0, 1, 2, 3
local REFUSED, PASSED, BLINDV, RATED, UNDECIDED, UNPACEDV, ANSWERED, WITHDRAWN = 1, 2, 3, 4, 5, 6, 7, 8
local EARLY_STEP, EARLY_MAX, SETTLE, MAX_REASK, SAMPLE_SPAN = 0.05, 0.2, 0.01, 60, 4
local PROBE_START, MIN_SAMPLE, PROBE_GROWTH, RAMP, MAX_CREDIT = 25, 0.1, 0.1, 1, 1
local MIN_BAND, CUT, MAX_HOLD, PROBE_AFTER = 0.02, 0.7, 30, 100
local MAX_RATE, MIN_RATE = 1e6, 1 / 60
local DRY_SPAN, DRY_REFUSALS, DRY_INTERVALS, WPROBE_START, WPROBE_MAX, MARGIN = 0.2, 3, 3, 0.1, 60, 0.005
local BHOLD_START, BHOLD_MAX, FLOOR_DEPTH, ANCHOR_STEPS = 30, 600, 8, 4
local ASK_TIMEOUT, ASK_POLL, REACH_SLACK = 1, 0.01, 0.001

local function learn(key, A, o)
  local now = tonumber(A[o])
  if now <= 0 then
    local t = redis.call('TIME')
    now = (t[1] - 1483228800) + t[2] / 1000000
  end
  local take = A[o + 1] == '1'
  local maxwait = tonumber(A[o + 2])
  local top = tonumber(A[o + 3])
  if top <= 0 then
    top = math.huge
  end
  local ttl = tonumber(A[o + 4])
  local nout = tonumber(A[o + 5])

  local s, orig = {}, {}
  if redis.call('EXISTS', key) == 1 then
    local v = redis.call('HMGET', key, unpack(F))
    for i, f in ipairs(F) do
      local x = tonumber(v[i] or '0')
      if x == nil then
        error('ratewise: field ' .. f .. ' of ' .. key .. ' is not a number: ' .. tostring(v[i]))
      end
      s[f], orig[f] = x, x
    end
  else
    local teaches = false
    for i = 0, nout - 1 do
      if tonumber(A[o + 7 + 9 * i]) == REFUSED or A[o + 10 + 9 * i] == '1' then
        teaches = true
      end
    end
    if not teaches then
      return {0, 0, '0', 0, '0', 0, 0, 0, 0, '0', 0, '0', 0}
    end
    for _, f in ipairs(F) do
      s[f], orig[f] = 0, nil
    end
  end
`

// learnLuaTail closes learn: each outcome taken in, then the turn, the
// state written back where it changed, and the answer.
const learnLuaTail = `
  local function withdrawn(seq)
    if seq == 0 then
      return
    end
    if seq == s.aseq then
      s.aseq = 0
      if s.mode == WINDOWED and seq == s.seq and seq > s.wseq then
        s.wseq = s.wseq + 1
      end
    end
    if seq == s.cask then
      s.cask = 0
    end
  end

  local function outcome(x)
    local seq, kind = x.seq, x.kind
    if kind == WITHDRAWN then
      withdrawn(seq)
      return
    end
    local explained = counted(x)
    if kind == UNPACEDV then
      passedBefore(x.passed)
    elseif kind == PASSED then
      if s.aseq ~= 0 and seq == s.aseq then
        s.aseq = 0
      end
    elseif kind == REFUSED then
      passedBefore(x.passed)
      if explained then
        if seq ~= 0 and seq == s.aseq then
          s.aseq = 0
        end
        return
      end
      refused(seq, x.hint)
    elseif kind == BLINDV then
      if s.mode == PACED then
        goBlind()
      end
    elseif kind == RATED then
      s.floor = 0
    elseif kind == UNDECIDED then
      s.floor = s.floor / 2
    end
  end

  local a = {took = 0, wait = 0, seq = 0, rate = 0, tell = 0}

  local function takeTurn()
    if s.mode == UNPACED then
      if s.cnt == 1 then
        s.seq = s.seq + 1
        a.took, a.seq = 1, s.seq
      end
    elseif s.mode == PACED then
      local r = rate()
      local iv = interval(r)
      local at = s.tat
      if at == 0 or now - at >= iv then
        if at ~= 0 then
          s.slack = 1
        end
        at = now
      end
      local wait = math.max(at - now, 0)
      if wait > maxwait then
        a.wait = wait
        return
      elseif wait > iv + REACH_SLACK then
        a.wait = wait - iv
        return
      end
      local goes = now + wait
      if s.last ~= 0 then
        local credit = math.min(goes - s.last, MAX_CREDIT, 2 * iv)
        if s.prob == 1 then
          credit = math.min(credit, PROBE_GROWTH)
        end
        s.succ = s.succ + math.max(credit, 0)
      end
      s.last = goes
      s.tat = at + iv
      s.seq = s.seq + 1
      a.took, a.wait, a.seq, a.rate = 1, wait, s.seq, r
    elseif s.mode == WINDOWED then
      if s.opens ~= 0 then
        if now < s.opens then
          a.wait = s.opens - now
          return
        end
        if s.opat ~= 0 then
          local p = now - s.opat
          if s.per == 0 or p < s.per then
            s.per = p
          end
        end
        s.opens, s.opat, s.wseq, s.aseq = 0, now, s.seq, 0
      end
      local used = s.seq - s.wseq
      if s.conf == 1 and s.per > 0 and s.quota > 0 and used >= s.quota then
        s.opens, s.fore = s.opat + s.per + MARGIN, 1
        a.wait = math.max(s.opens - now, 0)
        return
      elseif s.aseq ~= 0 and now < s.auntil then
        a.wait = math.min(ASK_POLL, s.auntil - now)
        return
      end
      s.seq = s.seq + 1
      a.took, a.seq = 1, s.seq
      if s.conf == 0 and (used == 0 or used == s.quota) then
        s.aseq, s.auntil = s.seq, now + ASK_TIMEOUT
        a.tell = 1
      end
    end
  end

  if s.mode == BLIND and now >= s.bunt then
    s.mode = UNPACED
  end
  for i = 0, nout - 1 do
    local b = o + 6 + 9 * i
    outcome({seq = tonumber(A[b]), kind = tonumber(A[b + 1]), hint = tonumber(A[b + 2]), passed = tonumber(A[b + 3]),
      counted = A[b + 4] == '1', rem = tonumber(A[b + 5]), limit = tonumber(A[b + 6]), reset = tonumber(A[b + 7]),
      due = A[b + 8] == '1'})
  end
  if take then
    local asks = false
    if s.cnt == 1 and s.mode ~= BLIND then
      a.wait, asks = countWait()
    end
    if a.wait <= 0 then
      takeTurn()
      if asks and a.took == 1 then
        s.cask, s.caskt, a.tell = a.seq, now + ASK_TIMEOUT, 1
      end
    end
  end

  local changed = {}
  for _, f in ipairs(F) do
    if s[f] ~= orig[f] then
      changed[#changed + 1] = f
      changed[#changed + 1] = string.format('%.17g', s[f])
    end
  end
  if #changed > 0 then
    redis.call('HSET', key, unpack(changed))
    redis.call('PEXPIRE', key, ttl)
  end

  local paced = 0
  if s.mode == PACED or s.mode == WINDOWED or (s.cnt == 1 and s.mode ~= BLIND) then
    paced = 1
  end
  local windowed, quota, blind, held, ratenow = 0, 0, 0, 0, 0
  if s.mode == PACED then
    ratenow = rate()
  elseif s.mode == WINDOWED then
    windowed, quota = 1, s.quota
    if s.opens > now then
      held = s.opens - now
    end
  elseif s.mode == BLIND then
    blind = 1
  end
  local overstate = s.notw
  if s.cnt == 1 and s.crc == 1 and s.mode ~= BLIND then
    overstate = 1
  end
  return {paced, a.took, string.format('%.17g', a.wait), a.seq, string.format('%.17g', a.rate), a.tell, overstate,
    windowed, quota, string.format('%.17g', held), blind, string.format('%.17g', ratenow), s.cnt}
end
`

// learnScript: KEYS[1] the key's hash, ARGV learn's from index 1.
var learnScript = goredis.NewScript(`
redis.replicate_commands()
` + learnLua + `
return learn(KEYS[1], ARGV, 1)
`)
