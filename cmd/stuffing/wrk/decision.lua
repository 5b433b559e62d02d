-- wrk script: every request asks XCloak's decision API about a sign-in to
-- an application that keeps its own users, each for an account and a
-- client address no other request of the run uses, so that no limit is
-- reached and every answer should be 200 "allow": what is measured is the
-- cost of a decision that admits (every rule checked and counted, an
-- attempt id stored), not of a rejection. Answers are counted by status
-- and decision ("status 200 allow: N").
--
--   STUFFING_API_KEY=... STUFFING_TAG=$(openssl rand -hex 4) \
--     wrk -t2 -c64 -d5s --latency -s cmd/stuffing/wrk/decision.lua http://127.0.0.1:18080
--
-- Attempt k (a 40-bit number) is for account TAG-k@example.com from
-- fdKK:KKKK:KKKK::1, an IPv6 address in a /48 of its own, so that the
-- ladder's every rung (address, /56, /48) is checked, one more than for an
-- IPv4 client. Thread i of a run counts from STUFFING_BASE + i * 2^22, so
-- a run with a later STUFFING_BASE, threads * 2^22 on, uses none of the
-- same accounts and addresses.

local dir = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or ""
dofile(dir .. "status.lua")

local key = os.getenv("STUFFING_API_KEY") or ""
local tag = os.getenv("STUFFING_TAG") or "bench"
local base = tonumber(os.getenv("STUFFING_BASE") or "0")
local block = 4194304 -- 2^22 attempts per thread and run
local space = 1099511627776 -- 2^40 addresses in fd00::/8's /48s

wrk.method = "POST"
wrk.path = "/api/v1/attempts"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. key

local status_setup, status_init = setup, init
local threads_set = 0

function setup(thread)
  status_setup(thread)
  thread:set("first", (base + threads_set * block) % space)
  threads_set = threads_set + 1
end

function init(args)
  status_init(args)
  k = first
end

function request()
  local body = string.format(
    '{"kind":"login","account":"%s-%.0f@example.com","client_ip":"fd%02x:%04x:%04x::1"}',
    tag, k, math.floor(k / 4294967296) % 256, math.floor(k / 65536) % 65536, k % 65536)
  k = (k + 1) % space
  return wrk.format(nil, nil, nil, body)
end

function classify(status, body)
  return body:match('"decision"%s*:%s*"(%a+)"')
end
