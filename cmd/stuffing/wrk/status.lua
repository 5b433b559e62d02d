-- wrk script: counts the answers of each status and prints them when the
-- run ends, one line each, in the words login.lua uses:
--
--   status 200: 112264 (53466/s)
--
-- Alone it sends GET / (the bare handler of "stuffing hello"); the other
-- scripts of "stuffing compare" load it first and then say what to send.
-- A script may set the global "classify" to a function(status, body) that
-- returns a word to count the answer under beside its status, as
-- "status 200 allow: 1234"; without it wrk is spared handing bodies over.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  counts = {}
end

function response(status, headers, body)
  local key = tostring(status)
  if classify then
    local word = classify(status, body)
    if word then
      key = key .. " " .. word
    end
  end
  counts[key] = (counts[key] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, thread in ipairs(threads) do
    for key, n in pairs(thread:get("counts")) do
      total[key] = (total[key] or 0) + n
    end
  end
  local seconds = summary.duration / 1e6
  for key, n in pairs(total) do
    io.write(string.format("status %s: %d (%.0f/s)\n", key, n, n / seconds))
  end
end
