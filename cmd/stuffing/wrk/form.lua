-- wrk script: every request is the same sign-in through the HTML form,
-- POST /login, for one account, so that after the account's limit every
-- answer from XCloak is a 429 page. Counts the answers of each status.
--
--   wrk -t2 -c64 -d20s -s cmd/stuffing/wrk/form.lua http://127.0.0.1:18080
--
-- Set STUFFING_EMAIL to attack another account.

local dir = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or ""
dofile(dir .. "status.lua")

local email = os.getenv("STUFFING_EMAIL") or "wrk-victim@example.com"

wrk.method = "POST"
wrk.path = "/login"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.body = "email=" .. email:gsub("@", "%%40") .. "&password=not-the-password"
