package main

import (
	"bytes"
	"html/template"
	"net/http"
)

// page is what the one page template shows.
type page struct {
	// SignedIn is the signed-in email: the home page.
	SignedIn string
	// Verify: the password was right, but this new browser must be
	// verified another way first.
	Verify bool
	// Email and Error refill the sign-in form.
	Email string
	Error string
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Own users</title>
<style>body{font:16px system-ui,sans-serif;max-width:28rem;margin:3rem auto}label,input,button{display:block;margin:.4rem 0}.error{color:#b00}</style>
</head>
<body>
{{if .SignedIn}}
<h1>Welcome</h1>
<p>Signed in as <strong>{{.SignedIn}}</strong>.</p>
<form method="post" action="/logout"><button>Sign out</button></form>
{{else if .Verify}}
<h1>Verify it is you</h1>
<p>This browser is new to your account. Before it is signed in, confirm it from the link we would send to your email address.</p>
{{else}}
<h1>Sign in</h1>
{{if .Error}}<p class="error" role="alert">{{.Error}}</p>{{end}}
<form method="post" action="/login">
<label>Email <input name="email" type="email" value="{{.Email}}" autocomplete="username" required></label>
<label>Password <input name="password" type="password" autocomplete="current-password" required></label>
<button>Sign in</button>
</form>
{{end}}
</body>
</html>
`))

// page writes p with status.
func (a *App) page(w http.ResponseWriter, status int, p page) {
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, p); err != nil {
		a.log.Error("rendering the page", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}
