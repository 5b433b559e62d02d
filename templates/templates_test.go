package templates

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
	"golang.org/x/net/html"

	"github.com/xcloak/xcloak/auth"
)

// hostile is a user-supplied value that must come out as text, never markup.
const hostile = "<script>alert(1)</script>"

// render renders c and parses the result, failing the test on any error.
func render(t *testing.T, c templ.Component) (string, *html.Node) {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatalf("Render: %v", err)
	}
	doc, err := html.Parse(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatalf("parse rendered HTML: %v", err)
	}
	return buf.String(), doc
}

// elements returns every element named tag under n, in document order.
func elements(n *html.Node, tag string) []*html.Node {
	var found []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && d.Data == tag {
			found = append(found, d)
		}
	}
	return found
}

// attr returns the value of n's attribute key and whether it is present.
func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// text is the visible text under n with runs of white space collapsed.
func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
			b.WriteString(" ")
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// byRole returns the text of every element with the given role attribute.
func byRole(doc *html.Node, role string) []string {
	var texts []string
	for d := range doc.Descendants() {
		if d.Type != html.ElementNode {
			continue
		}
		if r, _ := attr(d, "role"); r == role {
			texts = append(texts, text(d))
		}
	}
	return texts
}

// forms returns the action of every form, in document order.
func forms(doc *html.Node) []string {
	var actions []string
	for _, f := range elements(doc, "form") {
		a, _ := attr(f, "action")
		actions = append(actions, a)
	}
	return actions
}

// contains reports whether any of list contains want.
func contains(list []string, want string) bool {
	for _, s := range list {
		if strings.Contains(s, want) {
			return true
		}
	}
	return false
}

var (
	signedOut = Nav{}
	signedIn  = Nav{SignedIn: true, Email: "ada@example.com"}
	admin     = Nav{SignedIn: true, Email: "root@example.com", IsAdmin: true}
	joined    = time.Date(2023, 5, 17, 8, 0, 0, 0, time.UTC)
	started   = time.Date(2024, 11, 2, 14, 30, 0, 0, time.UTC)
)

// pages is one sample of every page in each state worth checking; every
// test below runs over all of them.
var pages = []struct {
	name  string
	title string
	c     templ.Component
}{
	{"login empty", "Sign in", LoginPage(LoginProps{Nav: signedOut})},
	{"login failed", "Sign in", LoginPage(LoginProps{Nav: signedOut, Email: hostile, Error: "Email or password is incorrect."})},
	{"login limited", "Sign in", LoginPage(LoginProps{Nav: signedOut, Email: "ada@example.com", RetryAfterSeconds: 300})},
	{"login notice", "Sign in", LoginPage(LoginProps{Nav: signedOut, Notice: "Your password was changed. Sign in with the new one."})},
	{"account", "Your account", AccountPage(AccountProps{Nav: signedIn, Email: hostile, MemberSince: joined, SignedInAt: started})},
	{"account admin", "Your account", AccountPage(AccountProps{Nav: admin, Email: "root@example.com", IsAdmin: true, MemberSince: joined, SignedInAt: started})},
	{"account zero times", "Your account", AccountPage(AccountProps{Nav: signedIn, Email: "ada@example.com"})},
	{"account notice", "Your account", AccountPage(AccountProps{Nav: signedIn, Email: "ada@example.com", Notice: PasswordChangedText})},
	{"password change", "Change your password", PasswordChangePage(PasswordChangeProps{Nav: signedIn})},
	{"password change required", "Change your password", PasswordChangePage(PasswordChangeProps{Nav: signedIn, Required: true})},
	{"password change failed", "Change your password", PasswordChangePage(PasswordChangeProps{Nav: signedIn, Error: "This password has appeared in a data breach; choose another one."})},
	{"password change limited", "Change your password", PasswordChangePage(PasswordChangeProps{Nav: signedIn, RetryAfterSeconds: 60})},
	{"reset request", "Reset your password", ResetRequestPage(ResetRequestProps{Nav: signedOut})},
	{"reset request failed", "Reset your password", ResetRequestPage(ResetRequestProps{Nav: signedOut, Email: hostile, Error: "Enter a valid email address.", RetryAfterSeconds: 30})},
	{"reset request sent", "Reset your password", ResetRequestPage(ResetRequestProps{Nav: signedOut, Email: "ada@example.com", Sent: true})},
	{"reset confirm", "Choose a new password", ResetConfirmPage(ResetConfirmProps{Nav: signedOut, Token: "q5Hc2ZWm-Ab_9"})},
	{"reset confirm failed", "Choose a new password", ResetConfirmPage(ResetConfirmProps{Nav: signedOut, Token: "q5Hc2ZWm-Ab_9", Error: "The two passwords do not match."})},
	{"reset confirm invalid", "Choose a new password", ResetConfirmPage(ResetConfirmProps{Nav: signedOut, Token: "expired", Invalid: true})},
	{"error", "Page not found", ErrorPage(ErrorProps{Nav: signedIn, Status: 404, Title: "Page not found", Message: hostile})},
	{"error without title", "Internal Server Error", ErrorPage(ErrorProps{Nav: signedOut, Status: 500})},
	{"error without status", "Something went wrong", ErrorPage(ErrorProps{Nav: signedOut})},
}

func TestPagesAreWellFormed(t *testing.T) {
	for _, pg := range pages {
		t.Run(pg.name, func(t *testing.T) {
			out, doc := render(t, pg.c)

			if got := len(elements(doc, "h1")); got != 1 {
				t.Errorf("<h1> count = %d, want 1", got)
			}
			if h := elements(doc, "html"); len(h) != 1 {
				t.Errorf("<html> count = %d, want 1", len(h))
			} else if lang, _ := attr(h[0], "lang"); lang != "en" {
				t.Errorf("<html lang> = %q, want %q", lang, "en")
			}
			if got, want := text(elements(doc, "title")[0]), pg.title+" · XCloak"; got != want {
				t.Errorf("<title> = %q, want %q", got, want)
			}
			if !strings.Contains(out, `<meta name="viewport" content="width=device-width, initial-scale=1">`) {
				t.Error("no viewport meta tag")
			}
			if !strings.Contains(out, `<link rel="stylesheet" href="/static/app.css">`) {
				t.Error("no link to /static/app.css")
			}
			if m := elements(doc, "main"); len(m) != 1 {
				t.Errorf("<main> count = %d, want 1", len(m))
			} else if id, _ := attr(m[0], "id"); id != "main" {
				t.Errorf("<main id> = %q, want %q", id, "main")
			}
			if !strings.Contains(out, `href="#main"`) {
				t.Error("no skip link to #main")
			}
			for _, bad := range []string{"style=", "<style"} {
				if strings.Contains(strings.ToLower(out), bad) {
					t.Errorf("output contains %q, which the Content-Security-Policy blocks", bad)
				}
			}
			// Scripts only from /static/, as script-src 'self' allows:
			// none inline.
			for _, s := range elements(doc, "script") {
				if src, _ := attr(s, "src"); !strings.HasPrefix(src, "/static/") || s.FirstChild != nil {
					t.Errorf("<script src=%q> with content %t: only scripts from /static/ run under the Content-Security-Policy", src, s.FirstChild != nil)
				}
			}
			for d := range doc.Descendants() {
				for _, a := range d.Attr {
					if strings.HasPrefix(a.Key, "on") {
						t.Errorf("<%s> has event handler attribute %s", d.Data, a.Key)
					}
				}
			}
		})
	}
}

func TestInputsHaveLabels(t *testing.T) {
	for _, pg := range pages {
		t.Run(pg.name, func(t *testing.T) {
			_, doc := render(t, pg.c)
			labelled := map[string]bool{}
			for _, l := range elements(doc, "label") {
				if f, ok := attr(l, "for"); ok {
					labelled[f] = true
				}
			}
			ids := map[string]bool{}
			for d := range doc.Descendants() {
				if id, ok := attr(d, "id"); ok && d.Type == html.ElementNode {
					if ids[id] {
						t.Errorf("id %q used more than once", id)
					}
					ids[id] = true
				}
			}
			for _, in := range elements(doc, "input") {
				typ, _ := attr(in, "type")
				if typ == "hidden" || typ == "submit" {
					continue
				}
				id, ok := attr(in, "id")
				if !ok {
					t.Errorf("<input type=%q> has no id for a label to point at", typ)
					continue
				}
				if !labelled[id] {
					t.Errorf("<input id=%q> has no <label for=%q>", id, id)
				}
				name, _ := attr(in, "name")
				if name == "" {
					t.Errorf("<input id=%q> has no name, so its value is never posted", id)
				}
				if ref, ok := attr(in, "aria-describedby"); ok {
					for _, r := range strings.Fields(ref) {
						if !ids[r] {
							t.Errorf("<input id=%q> aria-describedby names %q, which is not on the page", id, r)
						}
					}
				}
			}
		})
	}
}

func TestUserValuesAreEscaped(t *testing.T) {
	tests := []struct {
		name string
		c    templ.Component
	}{
		{"login email", LoginPage(LoginProps{Email: hostile})},
		{"login error", LoginPage(LoginProps{Error: hostile})},
		{"login notice", LoginPage(LoginProps{Notice: hostile})},
		{"nav email", LoginPage(LoginProps{Nav: Nav{SignedIn: true, Email: hostile}})},
		{"account email", AccountPage(AccountProps{Email: hostile})},
		{"reset request email", ResetRequestPage(ResetRequestProps{Email: hostile})},
		{"reset confirm error", ResetConfirmPage(ResetConfirmProps{Token: "t", Error: hostile})},
		{"password change error", PasswordChangePage(PasswordChangeProps{Error: hostile})},
		{"account notice", AccountPage(AccountProps{Notice: hostile})},
		{"error title", ErrorPage(ErrorProps{Title: hostile})},
		{"error message", ErrorPage(ErrorProps{Message: hostile})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _ := render(t, tt.c)
			if strings.Contains(out, hostile) {
				t.Errorf("output contains %q unescaped", hostile)
			}
			if want := "&lt;script&gt;alert(1)&lt;/script&gt;"; !strings.Contains(out, want) {
				t.Errorf("output lacks the escaped value %q", want)
			}
		})
	}
}

func TestNav(t *testing.T) {
	tests := []struct {
		name        string
		nav         Nav
		wantLinks   []string
		noLinks     []string
		wantSignOut bool
		wantEmail   bool
	}{
		{"signed out", Nav{}, []string{"/", "/login"}, []string{"/account", "/admin"}, false, false},
		{"signed in", signedIn, []string{"/", "/account"}, []string{"/login", "/admin"}, true, true},
		{"admin", admin, []string{"/", "/account", "/admin"}, []string{"/login"}, true, true},
		{"admin flag ignored when signed out", Nav{IsAdmin: true, Email: "x@example.com"}, []string{"/login"}, []string{"/admin", "/account"}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, doc := render(t, ErrorPage(ErrorProps{Nav: tt.nav, Status: 404}))
			header := elements(doc, "header")[0]
			links := map[string]bool{}
			for _, a := range elements(header, "a") {
				href, _ := attr(a, "href")
				links[href] = true
			}
			for _, l := range tt.wantLinks {
				if !links[l] {
					t.Errorf("header has no link to %s", l)
				}
			}
			for _, l := range tt.noLinks {
				if links[l] {
					t.Errorf("header links to %s, want no such link", l)
				}
			}
			if got := contains(forms(header), "/logout"); got != tt.wantSignOut {
				t.Errorf("sign-out form present = %v, want %v", got, tt.wantSignOut)
			}
			for _, f := range elements(header, "form") {
				if m, _ := attr(f, "method"); m != "post" {
					t.Errorf("header form method = %q, want post", m)
				}
			}
			if got := strings.Contains(text(header), tt.nav.Email) && tt.nav.Email != ""; got != tt.wantEmail {
				t.Errorf("email shown = %v, want %v", got, tt.wantEmail)
			}
		})
	}
}

func TestLoginPage(t *testing.T) {
	tests := []struct {
		name       string
		p          LoginProps
		wantAlerts []string
		wantStatus []string
	}{
		{"clean", LoginProps{}, nil, nil},
		{"failed", LoginProps{Email: "ada@example.com", Error: "Email or password is incorrect."}, []string{"Email or password is incorrect."}, nil},
		{"limited in seconds", LoginProps{RetryAfterSeconds: 45}, []string{"Too many attempts. Try again in 45 seconds."}, nil},
		{"limited in minutes", LoginProps{RetryAfterSeconds: 601}, []string{"Too many attempts. Try again in 11 minutes."}, nil},
		{"notice", LoginProps{Notice: "Your password was changed. Sign in with the new one."}, nil, []string{"Your password was changed. Sign in with the new one."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, doc := render(t, LoginPage(tt.p))
			alerts, statuses := byRole(doc, "alert"), byRole(doc, "status")
			if len(tt.wantAlerts) == 0 && len(alerts) > 0 {
				t.Errorf("alerts = %q, want none", alerts)
			}
			for _, want := range tt.wantAlerts {
				if !contains(alerts, want) {
					t.Errorf("alerts = %q, want one containing %q", alerts, want)
				}
			}
			if len(tt.wantStatus) == 0 && len(statuses) > 0 {
				t.Errorf("status messages = %q, want none", statuses)
			}
			for _, want := range tt.wantStatus {
				if !contains(statuses, want) {
					t.Errorf("status messages = %q, want one containing %q", statuses, want)
				}
			}
			if got := forms(doc); !contains(got, "/login") {
				t.Errorf("form actions = %q, want one posting to /login", got)
			}
			inputs := map[string]*html.Node{}
			for _, in := range elements(doc, "input") {
				id, _ := attr(in, "id")
				inputs[id] = in
			}
			email, password := inputs["email"], inputs["password"]
			if email == nil || password == nil {
				t.Fatalf("inputs = %v, want email and password", inputs)
			}
			for _, c := range []struct {
				in        *html.Node
				key, want string
			}{
				{email, "type", "email"},
				{email, "name", FieldEmail},
				{email, "autocomplete", "username"},
				{email, "maxlength", strconv.Itoa(auth.MaxEmailBytes)},
				{email, "required", ""},
				{email, "value", tt.p.Email},
				{password, "type", "password"},
				{password, "name", FieldPassword},
				{password, "autocomplete", "current-password"},
				{password, "required", ""},
			} {
				got, ok := attr(c.in, c.key)
				if !ok || got != c.want {
					id, _ := attr(c.in, "id")
					t.Errorf("#%s %s = %q (present %v), want %q", id, c.key, got, ok, c.want)
				}
			}
			if _, ok := attr(password, "value"); ok {
				t.Error("password input has a value attribute; a password is never sent back")
			}
			if !strings.Contains(text(doc), "Forgot your password?") {
				t.Error("no \"Forgot your password?\" link")
			}
		})
	}
}

func TestAccountPage(t *testing.T) {
	tests := []struct {
		name      string
		p         AccountProps
		wantText  []string
		wantAdmin bool
	}{
		{
			"member",
			AccountProps{Nav: signedIn, Email: "ada@example.com", MemberSince: joined, SignedInAt: started},
			[]string{"ada@example.com", "17 May 2023", "2 November 2024 at 14:30 UTC", "Member"},
			false,
		},
		{
			"admin",
			AccountProps{Nav: admin, Email: "root@example.com", IsAdmin: true, MemberSince: joined, SignedInAt: started},
			[]string{"root@example.com", "Administrator"},
			true,
		},
		{
			"times in another zone",
			AccountProps{Nav: signedIn, MemberSince: joined.In(time.FixedZone("X", -10*60*60)), SignedInAt: started.In(time.FixedZone("Y", 9*60*60))},
			[]string{"17 May 2023", "2 November 2024 at 14:30 UTC"},
			false,
		},
		{"unknown times", AccountProps{Nav: signedIn, Email: "ada@example.com"}, []string{"Unknown"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, doc := render(t, AccountPage(tt.p))
			main := elements(doc, "main")[0]
			body := text(main)
			for _, want := range tt.wantText {
				if !strings.Contains(body, want) {
					t.Errorf("page text = %q, want it to contain %q", body, want)
				}
			}
			if got := contains(forms(main), "/logout"); !got {
				t.Error("no sign-out form in the page body")
			}
			adminLink, changeLink := false, false
			for _, a := range elements(main, "a") {
				switch href, _ := attr(a, "href"); href {
				case "/admin":
					adminLink = true
				case "/account/password":
					changeLink = true
				}
			}
			if !changeLink {
				t.Error("no link to change the password")
			}
			if adminLink != tt.wantAdmin {
				t.Errorf("dashboard link present = %v, want %v", adminLink, tt.wantAdmin)
			}
			for _, tm := range elements(main, "time") {
				dt, _ := attr(tm, "datetime")
				if _, err := time.Parse(time.RFC3339, dt); err != nil {
					t.Errorf("<time datetime=%q> is not RFC 3339: %v", dt, err)
				}
			}
		})
	}
}

func TestResetRequestPage(t *testing.T) {
	tests := []struct {
		name       string
		p          ResetRequestProps
		wantForm   bool
		wantStatus string
		wantAlert  string
	}{
		{"clean", ResetRequestProps{}, true, "", ""},
		{"limited", ResetRequestProps{Email: "ada@example.com", RetryAfterSeconds: 119}, true, "", "Too many attempts. Try again in 119 seconds."},
		{"error", ResetRequestProps{Error: "Enter a valid email address."}, true, "", "Enter a valid email address."},
		{"sent", ResetRequestProps{Email: "ada@example.com", Sent: true, LinkTTL: 30 * time.Minute}, false, ResetSentText(30 * time.Minute), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, doc := render(t, ResetRequestPage(tt.p))
			if got := contains(forms(doc), "/password-reset"); got != tt.wantForm {
				t.Errorf("reset form present = %v, want %v", got, tt.wantForm)
			}
			statuses, alerts := byRole(doc, "status"), byRole(doc, "alert")
			if tt.wantStatus != "" && !contains(statuses, tt.wantStatus) {
				t.Errorf("status messages = %q, want %q", statuses, tt.wantStatus)
			}
			if tt.wantAlert != "" && !contains(alerts, tt.wantAlert) {
				t.Errorf("alerts = %q, want %q", alerts, tt.wantAlert)
			}
			if tt.wantAlert == "" && len(alerts) > 0 {
				t.Errorf("alerts = %q, want none", alerts)
			}
		})
	}
	t.Run("sent text does not depend on the address", func(t *testing.T) {
		_, a := render(t, ResetRequestPage(ResetRequestProps{Email: "known@example.com", Sent: true}))
		_, b := render(t, ResetRequestPage(ResetRequestProps{Email: "unknown@example.com", Sent: true}))
		if ta, tb := text(a), text(b); ta != tb {
			t.Errorf("page text differs by address:\n%q\n%q", ta, tb)
		}
	})
}

func TestResetConfirmPage(t *testing.T) {
	tests := []struct {
		name       string
		p          ResetConfirmProps
		wantAction string // empty when no form is expected
		wantAlert  string
	}{
		{"url-safe token", ResetConfirmProps{Token: "q5Hc2ZWm-Ab_9"}, "/password-reset/q5Hc2ZWm-Ab_9", ""},
		{"token cannot leave the path", ResetConfirmProps{Token: "../../login?x=1#y"}, "/password-reset/..%2F..%2Flogin%3Fx=1%23y", ""},
		{"token cannot be a scheme", ResetConfirmProps{Token: "javascript:alert(1)"}, "/password-reset/javascript:alert%281%29", ""},
		{"mismatch", ResetConfirmProps{Token: "abc", Error: "The two passwords do not match."}, "/password-reset/abc", "The two passwords do not match."},
		{"limited", ResetConfirmProps{Token: "abc", RetryAfterSeconds: 7200}, "/password-reset/abc", "Too many attempts. Try again in 120 minutes."},
		{"invalid", ResetConfirmProps{Token: "abc", Invalid: true}, "", "This reset link is invalid or has expired. Request a new one."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, doc := render(t, ResetConfirmPage(tt.p))
			actions := forms(doc)
			main := elements(doc, "main")[0]
			if tt.wantAction == "" {
				if got := forms(main); len(got) != 0 {
					t.Errorf("form actions = %q, want no form", got)
				}
				found := false
				for _, a := range elements(main, "a") {
					if href, _ := attr(a, "href"); href == "/password-reset" {
						found = true
					}
				}
				if !found {
					t.Error("no link to /password-reset to request a new link")
				}
			} else if !contains(actions, tt.wantAction) {
				t.Errorf("form actions = %q, want %q", actions, tt.wantAction)
			}
			alerts := byRole(doc, "alert")
			if tt.wantAlert != "" && !contains(alerts, tt.wantAlert) {
				t.Errorf("alerts = %q, want %q", alerts, tt.wantAlert)
			}
			if tt.wantAlert == "" && len(alerts) > 0 {
				t.Errorf("alerts = %q, want none", alerts)
			}
			for _, in := range elements(main, "input") {
				id, _ := attr(in, "id")
				for key, want := range map[string]string{"type": "password", "autocomplete": "new-password", "minlength": strconv.Itoa(auth.MinPasswordRunes), "maxlength": strconv.Itoa(auth.MaxPasswordBytes)} {
					if got, _ := attr(in, key); got != want {
						t.Errorf("#%s %s = %q, want %q", id, key, got, want)
					}
				}
			}
			if n := len(elements(main, "input")); tt.wantAction != "" && n != 2 {
				t.Errorf("%d inputs, want new password and confirmation", n)
			}
		})
	}
}

func TestErrorPage(t *testing.T) {
	tests := []struct {
		name      string
		p         ErrorProps
		wantH1    string
		wantText  string
		wantTitle string
	}{
		{"given title", ErrorProps{Status: 403, Title: "Not allowed", Message: "You cannot open this page."}, "Not allowed", "Error 403", "Not allowed · XCloak"},
		{"title from status", ErrorProps{Status: 404}, "Not Found", "Error 404", "Not Found · XCloak"},
		{"no status", ErrorProps{Message: "Please try again."}, "Something went wrong", "Please try again.", "Something went wrong · XCloak"},
		{"unknown status", ErrorProps{Status: 799}, "Something went wrong", "Error 799", "Something went wrong · XCloak"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, doc := render(t, ErrorPage(tt.p))
			if got := text(elements(doc, "h1")[0]); got != tt.wantH1 {
				t.Errorf("h1 = %q, want %q", got, tt.wantH1)
			}
			if got := text(elements(doc, "title")[0]); got != tt.wantTitle {
				t.Errorf("title = %q, want %q", got, tt.wantTitle)
			}
			if got := text(elements(doc, "main")[0]); !strings.Contains(got, tt.wantText) {
				t.Errorf("page text = %q, want it to contain %q", got, tt.wantText)
			}
			home := false
			for _, a := range elements(elements(doc, "main")[0], "a") {
				if href, _ := attr(a, "href"); href == "/" {
					home = true
				}
			}
			if !home {
				t.Error("no link home")
			}
		})
	}
}

func TestPasswordChangePage(t *testing.T) {
	for _, required := range []bool{false, true} {
		t.Run(fmt.Sprint("required ", required), func(t *testing.T) {
			_, doc := render(t, PasswordChangePage(PasswordChangeProps{Nav: signedIn, Required: required}))
			main := elements(doc, "main")[0]
			if !contains(forms(main), "/account/password") || !contains(forms(main), "/logout") {
				t.Errorf("forms post to %v, want /account/password and /logout", forms(main))
			}
			names := map[string]bool{}
			for _, in := range elements(main, "input") {
				n, _ := attr(in, "name")
				names[n] = true
			}
			for _, want := range []string{FieldCurrentPassword, FieldNewPassword, FieldConfirm} {
				if !names[want] {
					t.Errorf("no field %q", want)
				}
			}
			if got := strings.Contains(text(main), PasswordRequiredText); got != required {
				t.Errorf("says why the change is required = %v, want %v", got, required)
			}
		})
	}
}
