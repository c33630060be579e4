package redis

// The parts of learnLua that are learn.Shared's pace (shared.go and
// shared_refusal.go): its rate and climb, and what a refusal does to it.

// learnLuaPace is the pace: interval, rate, the climb's setters, the
// cut, the blind hold, and decrease.
const learnLuaPace = `
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

  local function passedSince(seq)
    if seq == 0 or seq <= s.eseq then
      return -1
    end
    return math.max(seq - s.eseq - 1 - s.sref, 0)
  end

  local function refillRate(passed, span)
    if span <= 0 or passed <= DRY_INTERVALS then
      return 0
    end
    return (passed - 1) / span
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
`

// learnLuaRefusal is refused, for a refusal of a turn, and passedBefore.
const learnLuaRefusal = `
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
      s.dry, s.dryf, s.dryt, s.dsh = 0, now, 0, 0
      s.dryp, s.danc = math.max(passed, 0), s.etgt
      if s.empty ~= 0 then
        s.dsh = refillRate(passed, now - s.empty)
      end
    end
    if target ~= 0 and (s.dryt == 0 or target < s.dryt) then
      s.dryt = target
    end
    s.dry = s.dry + 1
    s.lhint = hint
    local span = now - s.dryf
    local dry = s.dry >= DRY_REFUSALS and (span >= DRY_SPAN or span * s.dsh >= DRY_INTERVALS)
    if s.notw == 0 and top == math.huge and (dry or hint > 1) then
      becomeWindowed(s.dryt)
    else
      decrease(passed, hint)
    end
    s.empty, s.eseq, s.sref, s.etgt = now, math.max(seq, s.eseq), 0, target
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
`
