package redis

// The part of learnLua that is learn.Shared's count of the server's quota
// (shared_count.go).

// learnLuaCount is counted, refill, order and countWait, and their helpers.
const learnLuaCount = `
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
      if refusedNow then
        s.crc = 0
      end
      return false
    end
    if s.cnt == 0 then
      resetCount()
      s.cnt, s.crem, s.cseq, s.cat, s.ctold = 1, x.rem, x.seq, now, s.seq
    end
    if x.seq ~= 0 and x.seq == s.cask then
      s.cask = 0
    end
    if refusedNow then
      s.crefu = s.crefu + 1
    end
    local explained = refusedNow and x.rem == 0
    if refusedNow then
      s.crc = explained and 1 or 0
    end
    local resetPassed = s.crefl == 0 and s.creset ~= 0 and now >= s.creset
    local pastReset = explained and resetPassed
    local earlyAsk = (explained and x.due) or (pastReset and x.hint <= 0)
    if earlyAsk then
      s.cearly = math.min(math.max(2 * s.cearly, EARLY_STEP), EARLY_MAX)
      s.cretry, s.ccut = now + s.cearly, 1
    elseif pastReset then
      s.crefl, s.cnob = 1, 0
    elseif refusedNow and x.seq > s.ctold and x.seq - s.cseq > s.crem then
      s.cnob = 1
    end
    -- (a count whose reset is a window on from the one held is the new
    -- window's: learn's countReset.turned)
    local turnedNow = x.reset > 0 and s.creset ~= 0 and now + x.reset - s.creset >= 1
    local settled = now - s.cat >= SETTLE or turnedNow
    if (x.seq ~= 0 and x.seq < s.cseq) or
        (x.rem > s.crem and ((not settled) or x.seq == 0 or (x.seq <= s.ctold and not turnedNow))) then
      return explained
    end
    local remaining = x.rem
    if (not refusedNow) and resetPassed and x.reset > 0 and now + x.reset - s.creset >= 1 and x.rem * 2 < x.limit then
      s.crefl, s.cnob, s.cearly = 1, 0, 0
      s.cper = math.floor(now + x.reset - s.creset + 0.5)
      s.csat, s.cnat = 0, 0
    end
    if remaining > s.crem and s.crefl == 0 then
      if s.creset == 0 or now < s.creset then
        s.crefl = 1
      else
        s.creset, s.cearly, s.cretry, s.csat, s.cnat = 0, 0, 0, 0, 0
        if s.ccut == 1 then
          s.copen = now
        end
        s.csaw, s.cbef, s.crefb = 1, s.seq, s.crefu
        if x.seq ~= 0 then
          s.cbef = x.seq - 1
        end
      end
    end
    if s.csat == 0 then
      s.csat, s.csseq, s.csrefu, s.csrem = now, math.max(s.cseq, x.seq), s.crefu, remaining
      s.cnat, s.cnseq, s.cnrefu, s.cnrem = 0, 0, 0, 0
    elseif now - s.csat >= SAMPLE_SPAN and s.cnat ~= 0 then
      s.csat, s.csseq, s.csrefu, s.csrem = s.cnat, s.cnseq, s.cnrefu, s.cnrem
      s.cnat, s.cnseq, s.cnrefu, s.cnrem = s.cat, s.cseq, s.crefu, s.crem
    elseif now - s.csat >= SAMPLE_SPAN / 2 and s.cnat == 0 then
      s.cnat, s.cnseq, s.cnrefu, s.cnrem = s.cat, s.cseq, s.crefu, s.crem
    end
    s.cseq = math.max(s.cseq, x.seq)
    if x.seq == 0 then
      s.cseq = s.seq
    end
    s.cat, s.ctold, s.crem, s.clim, s.crst = now, s.seq, remaining, x.limit, x.reset
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

  local function order()
    if s.csaw == 0 or s.crefl == 1 or s.clim <= 0 or s.cseq < s.cbef or s.seq < s.cseq then
      return 0
    end
    local seen = s.clim - s.crem
    local ours = (s.cseq - s.cbef) - (s.crefu - s.crefb)
    if ours > s.clim then
      return 0
    end
    if seen > ours then
      return math.min(seen - ours, s.seq - s.cseq)
    end
    return seen - ours
  end

  local function countWait()
    local left = s.crem - (s.seq - s.cseq) + order()
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
`
