-- wrk script: every request is the same JSON sign-in for one account, so
-- that after the first few (the per-account limit) every answer from XCloak
-- is a 429. Prints how many answers of each status came back.
--
--   wrk -t2 -c64 -d20s -s cmd/stuffing/wrk/login.lua http://127.0.0.1:18080
--
-- Set STUFFING_EMAIL to attack another account.

local email = os.getenv("STUFFING_EMAIL") or "wrk-victim@example.com"

wrk.method = "POST"
wrk.path = "/api/v1/login"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"email":"' .. email .. '","password":"not-the-password"}'

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  counts = {}
end

function response(status, headers, body)
  counts[status] = (counts[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, thread in ipairs(threads) do
    local c = thread:get("counts")
    for status, n in pairs(c) do
      total[status] = (total[status] or 0) + n
    end
  end
  local seconds = summary.duration / 1e6
  for status, n in pairs(total) do
    io.write(string.format("status %d: %d (%.0f/s)\n", status, n, n / seconds))
  end
end
