package redis

// The part of learnLua that is learn.Shared's window (shared_window.go).

// learnLuaWindow is becomeWindowed and windowRefused.
const learnLuaWindow = `
  local function earlierTurn(anchor, step, opens)
    if anchor == 0 or step <= 0 or now - anchor > ANCHOR_STEPS * step then
      return 0
    end
    local turn = anchor
    if turn <= now then
      turn = anchor + (math.floor((now - anchor) / step) + 1) * step
    end
    if turn >= opens then
      return 0
    end
    return turn
  end

  local function becomeWindowed(opens)
    s.held = 0
    if opens == 0 or opens <= now then
      opens = now + WPROBE_START
    else
      s.held = opens - now
    end
    s.mode = WINDOWED
    s.opens, s.prb = opens, WPROBE_START
    s.quota, s.conf, s.fore, s.per, s.opat, s.aseq = 0, 0, 0, 0, 0, 0
    if s.ppaced == 0 then
      s.quota = s.pfirst
    elseif s.dryp >= 2 then
      s.quota = s.dryp
    end
    local turn = earlierTurn(s.danc, s.lhint, opens)
    if turn ~= 0 then
      s.opens, s.fore = turn, 1
    end
    s.prob, s.tat = 0, 0
    s.cut = s.seq
  end

  local function windowRefused(seq, sibling, target)
    if s.conf == 1 and seq > s.qfrom and seq <= s.qto and s.quota > 0 then
      s.quota = s.quota - 1
    end
    if s.fore == 1 and s.opens == 0 and seq == s.wseq + 1 then
      s.per, s.fore, s.prb, s.opat = 0, 0, WPROBE_START, 0
      s.opens = now + s.prb
      if target ~= 0 then
        s.opens = target
      end
      if s.dryt > now and s.dryt < s.opens then
        s.opens = s.dryt
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
      used = s.seq - s.wseq - 1
    end
    if used < 2 or used * 4 < s.quota * 3 then
      local held = s.held
      if held <= 0 then
        held = s.per
      end
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
    s.quota, s.conf, s.fore = s.seq - s.wseq - 1, 1, 0
    s.qfrom, s.qto = s.wseq, s.seq
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
`
