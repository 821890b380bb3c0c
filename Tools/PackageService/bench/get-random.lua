-- wrk script: GET /packages/{name} for names drawn at random from a file, one name per line.
--   wrk -t2 -c4 -d10s -s get-random.lua http://127.0.0.1:8080 -- names.txt
-- Each thread draws from its own seeded generator, so a run repeats the same sequence. At the
-- end it prints one line for bench.sh: requests, duration, latency percentiles (microseconds)
-- and the error counts (a status other than 2xx/3xx counts as an error).

local threads = {}
local counter = 0

function setup(thread)
    counter = counter + 1
    thread:set("id", counter)
    table.insert(threads, thread)
end

local names = {}

function init(args)
    local path = args[1] or "names.txt"
    local file = assert(io.open(path, "r"), "cannot open " .. path)
    for line in file:lines() do
        if #line > 0 then names[#names + 1] = line end
    end
    file:close()
    assert(#names > 0, path .. " holds no name")
    math.randomseed(1000 + id)
end

function request()
    return wrk.format("GET", "/packages/" .. names[math.random(#names)])
end

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        "WRK requests=%d duration_us=%d rps=%.1f p50_us=%d p90_us=%d p99_us=%d max_us=%d mean_us=%.1f "
            .. "errors_status=%d errors_connect=%d errors_read=%d errors_write=%d errors_timeout=%d\n",
        summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
        latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean,
        e.status, e.connect, e.read, e.write, e.timeout))
end
