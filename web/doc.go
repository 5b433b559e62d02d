// Package web is XCloak's HTTP layer. It translates between HTTP (HTML
// forms and the JSON API, over the same auth.Service) and the auth package:
// it decodes and bounds input, finds the client's address behind trusted
// proxies, sets cookies and security headers, and maps the service's errors
// to status codes in one place (respond.go), for every route alike. The
// administrators' dashboard reads its data from package dashboard and its
// live stream's shared reads from web/live; web only routes and renders
// them. It holds no SQL and no Lua.
package web
