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
// overstate, windowed, quota, held for, blind, rate now, counted}, the floats as
// strings. A script using it calls redis.replicate_commands() first.
const learnLua = `
local F = {'mode', 'seq', 'tat', 'last', 'slack', 'prob', 'from', 'to', 'hold', 'band', 'succ', 'floor', 'atf',
  'cut', 'empty', 'eseq', 'sref', 'lhint', 'dry', 'dryf', 'dryt', 'notw', 'opens', 'quota', 'conf', 'fore',
  'wseq', 'opat', 'per', 'prb', 'held', 'aseq', 'auntil', 'bunt', 'bhold', 'pfirst', 'ppaced',
  'cnt', 'crem', 'clim', 'cseq', 'cat', 'creset', 'crst', 'crefl', 'cnob', 'cretry', 'cearly', 'ccut', 'copen',
  'creask', 'cper', 'cask', 'caskt', 'crefu', 'csat', 'csseq', 'csrefu', 'csrem'}
local CF = {'cnt', 'crem', 'clim', 'cseq', 'cat', 'creset', 'crst', 'crefl', 'cnob', 'cretry', 'cearly', 'ccut',
  'copen', 'creask', 'cper', 'cask', 'caskt', 'crefu', 'csat', 'csseq', 'csrefu', 'csrem'}
local UNPACED, PACED, WINDOWED, BLIND = 0, 1, 2, 3
local REFUSED, PASSED, BLINDV, RATED, UNDECIDED, UNPACEDV, ANSWERED = 1, 2, 3, 4, 5, 6, 7
local EARLY_STEP, EARLY_MAX, SETTLE, MAX_REASK, SAMPLE_SPAN = 0.05, 0.2, 0.01, 60, 4
local PROBE_START, MIN_SAMPLE, PROBE_GROWTH, RAMP, MAX_CREDIT = 25, 0.1, 0.1, 1, 1
local MIN_BAND, CUT, MAX_HOLD, PROBE_AFTER = 0.02, 0.7, 30, 100
local MAX_RATE, MIN_RATE = 1e6, 1 / 60
local DRY_SPAN, DRY_REFUSALS, WPROBE_START, WPROBE_MAX, MARGIN = 0.2, 3, 0.1, 60, 0.005
local BHOLD_START, BHOLD_MAX, FLOOR_DEPTH = 30, 600, 8
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

  local function interval(r)
    if r <= 0 then
      return 3600
    end
    return math.min(1 / r, 3600)
  end

  local function rate()
    local r
    if s.prob == 1 then
      r = s.from * 2 ^ (s.succ / PROBE_GROWTH)
    else
      local done = s.succ / RAMP
      local beyond = (s.succ - RAMP - s.hold) / RAMP
      if done < 1 then
        r = s.from + (s.to - s.from) * done
      elseif beyond <= 0 then
        r = s.to
      else
        r = s.to + s.band * (2 ^ beyond - 1)
      end
    end
    return math.max(math.min(r, top, MAX_RATE), MIN_RATE)
  end

  local function setPace(from, to, band, hold)
    s.prob, s.hold, s.band = 0, hold, band
    if band <= 0 then
      s.band = math.max(to - from, to * MIN_BAND)
    end
    s.from, s.to = math.min(from, top), math.max(math.min(to, top), 1e-9)
    s.succ = 0
  end

  local function probeHold(span, low)
    return math.min(math.max(span, PROBE_AFTER / low), MAX_HOLD)
  end

  local function setMeasure(low, high, span)
    local hold = probeHold(span, low)
    if s.lhint > 1 then
      high, hold = low, MAX_HOLD
    end
    setPace(low, high, 0, hold)
  end

  local function search(start)
    s.prob, s.from, s.succ = 1, math.min(start, top), 0
    s.floor = start / FLOOR_DEPTH
  end

  local function floored(r)
    if s.floor <= 0 then
      return r
    end
    return math.max(r, s.floor)
  end

  local function floorRate(hint)
    if hint <= 0 then
      return MIN_RATE
    end
    return math.max(1 / hint, MIN_RATE)
  end

  local function cutTo(r, cut, hint)
    local f = floorRate(hint)
    if r > f * (1 + 1e-9) then
      s.atf = 0
      return math.max(r * cut, f)
    elseif s.atf == 0 then
      s.atf = 1
      return r
    end
    return math.max(r * cut, MIN_RATE)
  end

  local function goBlind()
    s.bhold = math.min(math.max(2 * s.bhold, BHOLD_START), BHOLD_MAX)
    s.bunt = now + s.bhold
    s.mode, s.prob, s.tat = BLIND, 0, 0
    s.cut = s.seq
  end

  local function becomeWindowed(opens)
    if opens == 0 or opens <= now then
      opens = now + WPROBE_START
    end
    s.mode = WINDOWED
    s.opens, s.prb, s.held = opens, WPROBE_START, opens - now
    s.quota, s.conf, s.fore, s.per, s.opat, s.aseq = 0, 0, 0, 0, 0, 0
    if s.ppaced == 0 then
      s.quota = s.pfirst
    end
    s.prob, s.tat = 0, 0
    s.cut = s.seq
  end

  local function passedSince(seq)
    if seq == 0 or seq <= s.eseq then
      return -1
    end
    return math.max(seq - s.eseq - 1 - s.sref, 0)
  end

  local function decrease(passed, hint)
    local wasUnpaced = s.mode ~= PACED
    if passed == 0 then
      s.succ = 0
    end
    local before = rate()
    s.mode = PACED
    s.cut = s.seq
    local span = now - s.empty
    if not wasUnpaced and s.empty ~= 0 and span >= MIN_SAMPLE and s.slack == 0 and passed >= 2 then
      local low = math.max((passed - 1) / span, before * CUT)
      setMeasure(low, math.max((passed + 1) / span, low), span)
    elseif wasUnpaced and top ~= math.huge then
      search(cutTo(top, CUT, hint))
    elseif wasUnpaced then
      local start = PROBE_START
      if hint > 1 then
        start = math.max(PROBE_START / hint, MIN_RATE)
      end
      search(math.min(start, top))
    elseif s.prob == 1 then
      s.from, s.succ = floored(cutTo(before, 0.5, hint)), 0
    else
      local r = floored(cutTo(before, CUT, hint))
      setPace(r, r, 0, 0)
    end
    s.slack = 0
    s.tat = math.max(now, s.last) + interval(rate())
  end

  local function windowRefused(seq, sibling, target)
    if s.fore == 1 and s.opens == 0 and seq == s.wseq + 1 then
      s.per, s.fore, s.prb = 0, 0, WPROBE_START
      s.opens = now + s.prb
      if target ~= 0 then
        s.opens = target
      end
      s.cut = s.seq
      return true
    end
    if s.opens ~= 0 or (sibling and seq <= s.wseq) then
      if target ~= 0 and (s.opens == 0 or target < s.opens) then
        if s.opens ~= 0 then
          s.opens = target
        end
      elseif target == 0 and s.opens ~= 0 and now >= s.opens then
        s.prb = math.min(math.max(2 * s.prb, WPROBE_START), WPROBE_MAX)
        s.opens = now + s.prb
      end
      return true
    end
    if sibling then
      return true
    end
    local used = 0
    if seq > s.wseq then
      used = seq - s.wseq - 1
    end
    if used < 2 or used * 4 < s.quota * 3 then
      local held = math.max(s.held, s.per)
      local quota = s.quota
      if quota >= 2 and held >= MIN_SAMPLE then
        local low = (quota - 1) / held
        s.mode = PACED
        setMeasure(low, (quota + 1) / held, held)
        s.cut, s.empty, s.eseq, s.sref = s.seq, now, s.seq, 0
        s.notw = 1
        s.tat = now + interval(low)
        return true
      end
      return false
    end
    s.quota, s.conf, s.fore = used, 1, 0
    s.cut = s.seq
    if target ~= 0 then
      s.opens, s.held = target, target - now
    elseif s.per > 0 and s.opat + s.per > now then
      s.opens = s.opat + s.per
    else
      s.prb = WPROBE_START
      s.opens = now + s.prb
    end
    return true
  end

  local function refused(seq, hint)
    if s.mode == BLIND then
      return
    end
    if seq ~= 0 and seq == s.aseq then
      s.aseq = 0
    end
    local target = 0
    if hint > 0 then
      target = now + hint
    end
    local sibling = seq <= s.cut and (seq ~= 0 or s.mode ~= UNPACED)
    if s.mode == WINDOWED then
      if windowRefused(seq, sibling, target) then
        return
      end
      s.notw = 1
      s.mode = UNPACED
      sibling = false
    end
    if sibling then
      if seq > s.eseq then
        s.sref = s.sref + 1
      end
      if target ~= 0 and (s.dryt == 0 or target < s.dryt) then
        s.dryt = target
      end
      return
    end
    local passed = passedSince(seq)
    s.ppaced = s.ppaced + math.max(passed, 0)
    if passed > 0 or s.dryf == 0 then
      s.dry, s.dryf, s.dryt = 0, now, 0
    end
    if target ~= 0 and (s.dryt == 0 or target < s.dryt) then
      s.dryt = target
    end
    s.dry = s.dry + 1
    s.lhint = hint
    local dry = s.dry >= DRY_REFUSALS and now - s.dryf >= DRY_SPAN
    if s.notw == 0 and top == math.huge and (dry or hint > 1) then
      becomeWindowed(s.dryt)
    else
      decrease(passed, hint)
    end
    s.empty, s.eseq, s.sref = now, math.max(seq, s.eseq), 0
  end

  local function passedBefore(n)
    if n <= 0 or s.ppaced > 0 then
      return
    end
    s.pfirst = s.pfirst + n
    if s.mode == WINDOWED and s.conf == 0 then
      s.quota = s.pfirst
    end
  end

  local function resetCount()
    for _, f in ipairs(CF) do
      s[f] = 0
    end
  end

  local function noteReset(reset)
    if reset <= 0 then
      return
    end
    local at = now + reset
    if s.crefl == 1 or s.creset == 0 or at < s.creset or at - s.creset >= 1 then
      s.creset = at
    end
  end

  local function counted(x)
    local refusedNow = x.kind == REFUSED
    if not x.counted then
      if s.cnt == 1 and (x.kind == PASSED or x.kind == ANSWERED) then
        resetCount()
      end
      return false
    end
    if s.cnt == 0 then
      resetCount()
      s.cnt, s.crem, s.cseq, s.cat = 1, x.rem, x.seq, now
    end
    if x.seq ~= 0 and x.seq == s.cask then
      s.cask = 0
    end
    if refusedNow then
      s.crefu = s.crefu + 1
    end
    local explained = refusedNow and x.rem == 0
    local resetPassed = s.crefl == 0 and s.creset ~= 0 and now >= s.creset
    local pastReset = explained and resetPassed
    local earlyAsk = (explained and x.due) or (pastReset and x.hint <= 0)
    if earlyAsk then
      s.cearly = math.min(math.max(2 * s.cearly, EARLY_STEP), EARLY_MAX)
      s.cretry, s.ccut = now + s.cearly, 1
    elseif pastReset then
      s.crefl, s.cnob = 1, 0
    elseif refusedNow and x.seq > s.cseq and x.seq - s.cseq > s.crem then
      s.cnob = 1
    end
    local settled = now - s.cat >= SETTLE
    if (x.seq ~= 0 and x.seq < s.cseq) or (x.rem > s.crem and ((not settled) or x.seq == 0)) then
      return explained
    end
    local remaining = x.rem
    if (not refusedNow) and resetPassed and x.reset > 0 and now + x.reset - s.creset >= 1 and x.rem * 2 < x.limit then
      s.crefl, s.cnob, s.cearly = 1, 0, 0
      s.cper = math.floor(now + x.reset - s.creset + 0.5)
      s.csat = 0
    end
    if remaining > s.crem and s.crefl == 0 then
      if s.creset == 0 or now < s.creset then
        s.crefl = 1
      else
        s.creset, s.cearly, s.cretry, s.csat = 0, 0, 0, 0
        if s.ccut == 1 then
          s.copen = now
        end
      end
    end
    if s.csat == 0 then
      s.csat, s.csseq, s.csrefu, s.csrem = now, math.max(s.cseq, x.seq), s.crefu, remaining
    elseif now - s.csat >= SAMPLE_SPAN then
      s.csat, s.csseq, s.csrefu, s.csrem = s.cat, s.cseq, s.crefu, s.crem
    end
    s.cseq = math.max(s.cseq, x.seq)
    if x.seq == 0 then
      s.cseq = s.seq
    end
    s.cat, s.crem, s.clim, s.crst = now, remaining, x.limit, x.reset
    noteReset(x.reset)
    if x.due then
      noteReset(1e-9)
    end
    if remaining > 0 then
      s.creask = 0
    elseif x.reset <= 0 and x.hint <= 0 then
      s.creask = math.min(math.max(2 * s.creask, 1), MAX_REASK)
    end
    if explained and x.hint > 0 and not earlyAsk and s.copen == 0 then
      s.cretry = now + x.hint
    end
    return explained
  end

  local function refill()
    local r = 0
    if s.cnob == 1 then
      r = 0
    elseif s.cper > 0 then
      r = s.clim / s.cper
    elseif s.clim > s.crem and s.crst > 0 then
      r = (s.clim - s.crem) / s.crst
    end
    local span = s.cat - s.csat
    if s.csat ~= 0 and span >= MIN_SAMPLE then
      r = math.max(r, (s.cseq - s.csseq - (s.crefu - s.csrefu) + s.crem - s.csrem - 1) / span)
    end
    return math.min(r, 1e6)
  end

  local function countWait()
    local left = s.crem - (s.seq - s.cseq)
    local rf = refill()
    local credit = left + rf * (now - s.cat)
    if credit >= 1 then
      return 0, false
    end
    if s.crefl == 1 and rf > 0 then
      return math.max((1 - credit) / rf, 1e-9), false
    end
    local backAt = s.creset
    if backAt == 0 then
      backAt = s.cat + math.max(s.creask, MIN_SAMPLE)
    elseif s.copen ~= 0 and backAt > s.copen then
      backAt = s.copen + math.ceil(backAt - s.copen) + MARGIN
    end
    if s.cretry ~= 0 and (s.cretry < backAt or (s.cearly > 0 and now >= backAt)) then
      backAt = s.cretry
    end
    if now >= backAt then
      if s.cask ~= 0 and now < s.caskt then
        return math.min(ASK_POLL, s.caskt - now), false
      end
      return 0, true
    end
    local d = backAt - now
    if rf > 0 then
      d = math.min((1 - credit) / rf, d)
    end
    return math.max(d, 1e-9), false
  end

  local function outcome(x)
    local seq, kind = x.seq, x.kind
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
      if s.conf == 0 and used == 0 then
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
  return {paced, a.took, string.format('%.17g', a.wait), a.seq, string.format('%.17g', a.rate), a.tell, s.notw,
    windowed, quota, string.format('%.17g', held), blind, string.format('%.17g', ratenow), s.cnt}
end
`

// learnScript: KEYS[1] the key's hash, ARGV learn's from index 1.
var learnScript = goredis.NewScript(`
redis.replicate_commands()
` + learnLua + `
return learn(KEYS[1], ARGV, 1)
`)
