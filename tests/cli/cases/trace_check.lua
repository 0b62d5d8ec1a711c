-- trace_check.lua FILE KERNEL SPANS BYTES [MSGS [SLOTS]] — the shape of a --trace
-- file (tests/cli/trace.sh): the trace-event JSON object Perfetto opens,
-- one event a line; SPANS kernel spans named KERNEL, each on its own PE
-- row; link spans and DMA spans, every link span's size in its name; only
-- messages of BYTES bytes per rank in the collective's kernels' DMA reads.
-- With MSGS: the collective's IPCQ messages, each one send span and one
-- recv span of BYTES bytes that pair up exactly (see check_ipcq). With
-- SLOTS (the rings' slot count): each receiving side's occupancy counter
-- agrees with those spans slot by slot (see check_slots).
local kb = require("kbsim")
local path, kernel, nspans, bytes = arg[1], arg[2], tonumber(arg[3]), arg[4]
local nmsgs, nslots = tonumber(arg[5]), tonumber(arg[6])
local f = assert(io.open(path, "rb"))
local text = f:read("a")
f:close()

kb.check(text:sub(1, 17) == '{"traceEvents":[\n', "starts with {\"traceEvents\":[")
kb.check(text:sub(-27) == '\n],"displayTimeUnit":"ns"}\n', "ends the object with displayTimeUnit")

local count, kernels, rows, links, dmas, named, bad = 0, 0, {}, 0, 0, 0, 0
-- rows by "pid:tid" -> name; IPCQ spans and DMA vc_comm copies
local procs, threads, ipcq, comms = {}, {}, {}, 0
-- counter samples ("ph":"C"), in the order of the file
local counters = {}
-- "1.009763" us -> 1009763 ps, exactly
local function ps(us)
  local i, f = us:match("^(%d+)%.(%d%d%d%d%d%d)$")
  kb.check(i ~= nil, "a time with six decimals: " .. tostring(us))
  return tonumber(i) * 1000000 + tonumber(f)
end
local body = text:sub(18, -28)
for line in (body .. ",\n"):gmatch("(.-),?\n") do
  count = count + 1
  if not line:match('^{"ph":"[MXiC]","pid":%d+,"tid":%d+,.*}$') then
    bad = bad + 1
    if bad == 1 then kb.check(false, "not an event: " .. line) end
  end
  local tid = line:match('"tid":(%d+)')
  if line:find('{"ph":"C",', 1, true) == 1 then
    local pid, ts, name, v = line:match(
      '^{"ph":"C","pid":(%d+),"tid":%d+,"ts":([%d.]+),"name":"([^"]+)","args":{"value":(%-?%d+)}}$')
    kb.check(pid ~= nil, "a counter sample of an integer value: " .. line)
    counters[#counters + 1] = {row = pid .. ":" .. tid, name = name, at = ps(ts), value = tonumber(v)}
  elseif line:find('"cat":"kernel"', 1, true) then
    kb.check(line:find('"name":"' .. kernel .. '"', 1, true) ~= nil, "kernel span named " .. kernel .. ": " .. line)
    kernels = kernels + 1
    rows[tid] = (rows[tid] or 0) + 1
  elseif line:find('"cat":"link"', 1, true) then
    links = links + 1
    local b, name = line:match('"args":{"bytes":(%d+)'), line:match('"name":"(%d+) B"')
    if b and b == name then named = named + 1 end
  elseif line:find('"cat":"dma"', 1, true) then
    dmas = dmas + 1
    if line:find('"name":"comm ', 1, true) then comms = comms + 1 end
  elseif line:find('"cat":"ipcq"', 1, true) then
    local pid, ts, dur, what, nb, b, peer, msg, slot, slots = line:match(
      '^{"ph":"X","pid":(%d+),"tid":%d+,"ts":([%d.]+),"dur":([%d.]+),"cat":"ipcq",' ..
      '"name":"(%a+) (%d+) B","args":{"bytes":(%d+),"peer":"([^"]+)","msg":(%d+),' ..
      '"slot":(%d+),"slots":(%d+)}}$')
    kb.check(pid ~= nil, "an ipcq span: " .. line)
    kb.check(nb == b, "ipcq span named by its size: " .. line)
    ipcq[#ipcq + 1] = {row = pid .. ":" .. tid, what = what, bytes = b, peer = peer,
      msg = tonumber(msg), slot = tonumber(slot), slots = tonumber(slots),
      start = ps(ts), stop = ps(ts) + ps(dur)}
  elseif line:find('"name":"process_name"', 1, true) then
    local pid, name = line:match('"pid":(%d+),.*"args":{"name":"([^"]+)"}}$')
    procs[pid] = name
  elseif line:find('"name":"thread_name"', 1, true) then
    local pid, name = line:match('"pid":(%d+),.*"args":{"name":"([^"]+)"}}$')
    threads[pid .. ":" .. tid] = {pid = pid, name = name}
  end
end
local nrows = 0
for _, n in pairs(rows) do
  nrows = nrows + 1
  kb.check(n == 1, "one kernel span per PE row")
end
kb.check(kernels == nspans, ("%d kernel spans, want %d"):format(kernels, nspans))
kb.check(nrows == nspans, ("%d PE rows with a kernel, want %d"):format(nrows, nspans))
kb.check(links > 0 and named == links, ("%d link spans, %d named by their size"):format(links, named))
kb.check(dmas > 0, "DMA spans")
kb.check(text:find('"name":"thread_name","args":{"name":"cube0.pe0"}', 1, true) ~= nil, "a row named cube0.pe0")
kb.check(text:find('"name":"process_name","args":{"name":"sip0"}', 1, true) ~= nil, "a process named sip0")
kb.check(text:find('"bytes":' .. bytes .. ',', 1, true) ~= nil, "a transfer of " .. bytes .. " bytes")

-- IPCQ: NMSGS send spans and NMSGS recv spans, of BYTES bytes each. The
-- side a span is on, "sip0.cube0.pe0.ipcq.E" from its row
-- "cube0.pe0.ipcq.E.send" in process "sip0", is the other side's peer:
-- every send pairs with exactly one recv by (sender, receiver, msg), the
-- numbers on a channel are 0, 1, 2, ... in order of time, and the recv
-- ends after the send returned (its last slot is copied only then). Only
-- the IPCQ uses the DMA's vc_comm channels: one copy a slot.
local function check_ipcq()
  local sends, recvs, slots, pairs_ = 0, {}, 0, 0
  for _, e in ipairs(ipcq) do
    local row = threads[e.row]
    kb.check(row ~= nil, "an ipcq row named before its spans")
    local side, suffix = (procs[row.pid] .. "." .. row.name):match("^(.*)%.(%a+)$")
    kb.check(suffix == e.what, ("a %s span on row %s"):format(e.what, row.name))
    kb.check(side:match("%.ipcq%.") ~= nil and e.peer:match("%.ipcq%.") ~= nil, "ipcq sides named NAME.ipcq.DIR")
    kb.check(e.bytes == bytes, ("ipcq %s of %s bytes, want %s"):format(e.what, e.bytes, bytes))
    kb.check(e.slots >= 1 and e.stop >= e.start, "an ipcq span takes a slot and no negative time")
    e.from, e.to = e.what == "send" and side or e.peer, e.what == "send" and e.peer or side
    if e.what == "send" then
      sends = sends + 1
      slots = slots + e.slots
    else
      local k = e.from .. ">" .. e.to .. "#" .. e.msg
      kb.check(recvs[k] == nil, "one recv of message " .. k)
      recvs[k] = e
    end
  end
  local nrecvs, seen = 0, {}
  -- by receiving side: its sends by msg (one channel a receiving side)
  local chans = {}
  for _ in pairs(recvs) do nrecvs = nrecvs + 1 end
  kb.check(sends == nmsgs, ("%d ipcq send spans, want %d"):format(sends, nmsgs))
  kb.check(nrecvs == nmsgs, ("%d ipcq recv spans, want %d"):format(nrecvs, nmsgs))
  kb.check(comms == slots, ("%d vc_comm copies for %d ipcq slots sent"):format(comms, slots))
  for _, e in ipairs(ipcq) do
    if e.what == "send" then
      local ch = e.from .. ">" .. e.to
      local last = seen[ch]
      kb.check(e.msg == (last and last.msg + 1 or 0) and (not last or e.start >= last.stop),
        ("send %d on %s follows the one before"):format(e.msg, ch))
      seen[ch] = e
      local c = chans[e.to] or {from = e.from, sends = {}}
      chans[e.to] = c
      kb.check(c.from == e.from, "one sender to " .. e.to)
      c.sends[e.msg] = e
      local r = recvs[ch .. "#" .. e.msg]
      kb.check(r ~= nil, "a recv of message " .. ch .. "#" .. e.msg)
      kb.check(r.bytes == e.bytes and r.slots == e.slots and r.slot == e.slot,
        "send and recv of " .. ch .. "#" .. e.msg .. " agree")
      kb.check(r.stop > e.stop, ("recv of %s#%d ends at %d ps, after its send returned at %d ps")
        :format(ch, e.msg, r.stop, e.stop))
      pairs_ = pairs_ + 1
    end
  end
  return pairs_, chans, recvs
end

-- The occupancy of each receiving side's ring, "NAME.ipcq.DIR.slots", a
-- counter on a row of that name in the side's process. Sampled at every
-- change and only then, so in the order of the file (the order of time)
-- each sample is the one before +1 (a slot landed) or -1 (a recv consumed
-- one), from 0, within 0 .. SLOTS, back at 0 at the end. The k-th +1 is
-- the k-th slot sent on the channel landing: not before the call of the
-- send that carries it, not after the end of that message's recv; the
-- k-th -1 is the k-th slot read, within that message's recv span. So the
-- +1s count exactly the slots of the send spans. Every channel that
-- carried a message has a counter, and only those.
local function check_slots(chans, recvs)
  local by, order = {}, {}
  for _, c in ipairs(counters) do
    local row = threads[c.row]
    kb.check(row ~= nil, "a counter row named before its samples")
    kb.check(row.name == c.name, ("counter %s on a row of its name (%s)"):format(c.name, row.name))
    local side = (procs[row.pid] .. "." .. c.name):match("^(.*%.ipcq%.[^.]+)%.slots$")
    kb.check(side ~= nil, "a counter named NAME.ipcq.DIR.slots: " .. c.name)
    if not by[side] then
      by[side] = {}
      order[#order + 1] = side
    end
    table.insert(by[side], c)
  end
  local peak, nsides = 0, 0
  for _ in pairs(chans) do nsides = nsides + 1 end
  kb.check(#order == nsides, ("%d occupancy counters for %d receiving sides"):format(#order, nsides))
  for _, side in ipairs(order) do
    local ch = chans[side]
    kb.check(ch ~= nil, "an occupancy counter only where messages were received: " .. side)
    ch = ch or {from = "?", sends = {}}
    -- the message carrying each slot of the channel, in order
    local slotmsg = {}
    for m = 0, math.huge do
      local e = ch.sends[m]
      if not e then break end
      for _ = 1, e.slots do slotmsg[#slotmsg + 1] = m end
    end
    local v, at, ups, downs = 0, 0, 0, 0
    for _, c in ipairs(by[side]) do
      local d = c.value - v
      kb.check(d == 1 or d == -1, ("%s: %d after %d, a change of one slot"):format(side, c.value, v))
      kb.check(c.value >= 0 and c.value <= nslots, ("%s: %d slots full of %d"):format(side, c.value, nslots))
      kb.check(c.at >= at, side .. ": samples in the order of time")
      local k
      if d == 1 then ups = ups + 1; k = ups else downs = downs + 1; k = downs end
      local m = slotmsg[k]
      kb.check(m ~= nil, ("%s: slot %d %s, but only %d were sent"):format(side, k,
        d == 1 and "landed" or "read", #slotmsg))
      local s, r = ch.sends[m], m and recvs[ch.from .. ">" .. side .. "#" .. m]
      if not (s and r) then -- told above
      elseif d == 1 then
        kb.check(c.at >= s.start and c.at <= r.stop, ("%s: slot %d lands at %d ps, within send %d's call "
          .. "(%d ps) and its recv's end (%d ps)"):format(side, k, c.at, m, s.start, r.stop))
      else
        kb.check(c.at >= r.start and c.at <= r.stop, ("%s: slot %d read at %d ps, within recv %d "
          .. "(%d .. %d ps)"):format(side, k, c.at, m, r.start, r.stop))
      end
      v, at = c.value, c.at
      if v > peak then peak = v end
    end
    kb.check(v == 0, ("%s: %d slots still full at the end"):format(side, v))
    kb.check(ups == #slotmsg and downs == #slotmsg,
      ("%s: %d slots landed and %d read, %d sent"):format(side, ups, downs, #slotmsg))
  end
  return #order, peak
end
local msgs, chans, recvs = 0, nil, nil
if nmsgs then msgs, chans, recvs = check_ipcq() end
local nocc, peak = 0, 0
if nslots then nocc, peak = check_slots(chans, recvs) end
print(("trace ok: %d events, %d kernel, %d link, %d dma spans, %d ipcq messages")
  :format(count, kernels, links, dmas, msgs))
if nslots then
  print(("ipcq occupancy: %d counters, peak %d of %d slots"):format(nocc, peak, nslots))
end
