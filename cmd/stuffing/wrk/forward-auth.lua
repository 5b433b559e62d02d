-- wrk script: every request is the question a reverse proxy asks XCloak
-- before each request of a protected app, with a signed-in browser's
-- cookies: Traefik's forwardAuth and Caddy's forward_auth (the default),
-- or nginx's auth_request (STUFFING_AUTHZ=auth-request). Every answer
-- should be a 200; a 302 or 401 means the session is not (or no longer)
-- valid, a 403 that the host is not among XCLOAK_PROTECTED_HOSTS.
--
--   STUFFING_COOKIE='__Host-xcloak_session=...' \
--     wrk -t2 -c64 -d5s --latency -s cmd/stuffing/wrk/forward-auth.lua http://127.0.0.1:18080
--
-- STUFFING_HOST (default app.example.com) is the protected host asked
-- for, STUFFING_URI (default /) the path of the original request. XCloak
-- believes the X-Forwarded-* headers only from XCLOAK_TRUSTED_PROXIES, so
-- that must hold the address wrk connects from (127.0.0.1).

local dir = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or ""
dofile(dir .. "status.lua")

local cookie = os.getenv("STUFFING_COOKIE") or ""
local host = os.getenv("STUFFING_HOST") or "app.example.com"
local uri = os.getenv("STUFFING_URI") or "/"

wrk.method = "GET"
wrk.headers["Cookie"] = cookie
if os.getenv("STUFFING_AUTHZ") == "auth-request" then
  wrk.path = "/api/v1/authz/auth-request"
  wrk.headers["X-Original-URL"] = "https://" .. host .. uri
else
  wrk.path = "/api/v1/authz/forward-auth"
  wrk.headers["X-Forwarded-Method"] = "GET"
  wrk.headers["X-Forwarded-Proto"] = "https"
  wrk.headers["X-Forwarded-Host"] = host
  wrk.headers["X-Forwarded-Uri"] = uri
end
