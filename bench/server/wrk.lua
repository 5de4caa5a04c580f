-- wrk script of the server benchmark (seed 003's JMeter plan, in wrk).
--
-- Each wrk thread plays `sessions` users: every request carries the cookie
-- of one of them (SID=w<thread>u<n>, which the server adopts as the session
-- id), and each user alternates between /form1 and /form2, as the seed's
-- plan alternated between its two forms. Same requests for every allocator.
--
-- Argument (after `--`): sessions per thread (default 50). wrk runs for its
-- -d duration (thread:stop() does not end the run early, so the runner sizes
-- the duration to exceed the request count it wants). There is no response()
-- callback on purpose: it would make wrk copy every body into Lua and the
-- client would eat more of the CPU the server needs. done() prints one
-- machine-readable line:
--   WRKRESULT requests=N duration_us=N ... non2xx=N latency_p50_us=N ...

local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  sessions = tonumber(args[1]) or 50
  counter = 0
end

function request()
  counter = counter + 1
  local user = counter % sessions
  local form = (math.floor(counter / sessions) % 2) + 1
  return wrk.format("GET", "/form" .. form,
    { ["Cookie"] = string.format("SID=w%du%d", tid, user),
      ["Accept-Encoding"] = "gzip, deflate",
      ["User-Agent"] = "wrk (spry bench)" })
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRKRESULT requests=%d duration_us=%d bytes=%d non2xx=%d " ..
    "errors_connect=%d errors_read=%d errors_write=%d errors_timeout=%d " ..
    "latency_mean_us=%.1f latency_p50_us=%d latency_p99_us=%d latency_max_us=%d\n",
    summary.requests, summary.duration, summary.bytes, e.status,
    e.connect, e.read, e.write, e.timeout,
    latency.mean, latency:percentile(50), latency:percentile(99), latency.max))
end
