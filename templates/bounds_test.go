package templates

import (
	"strconv"
	"strings"
	"testing"

	"github.com/a-h/templ"

	"github.com/xcloak/xcloak/auth"
)

// TestFormsDeclareAuthBounds: every email field and every new-password field
// declares auth's bounds, so no form can drift from what the server accepts.
func TestFormsDeclareAuthBounds(t *testing.T) {
	bounds := map[string]map[string]string{
		"email":        {"maxlength": strconv.Itoa(auth.MaxEmailBytes)},
		"new-password": {"minlength": strconv.Itoa(auth.MinPasswordRunes), "maxlength": strconv.Itoa(auth.MaxPasswordBytes)},
	}
	tests := []struct {
		name string
		c    templ.Component
		want map[string]int // fields of each kind the page must hold
	}{
		{"login", LoginPage(LoginProps{}), map[string]int{"email": 1}},
		{"reset request", ResetRequestPage(ResetRequestProps{}), map[string]int{"email": 1}},
		{"reset confirm", ResetConfirmPage(ResetConfirmProps{Token: "abc"}), map[string]int{"new-password": 2}},
		{"password change", PasswordChangePage(PasswordChangeProps{}), map[string]int{"new-password": 2}},
		{"unlock request", UnlockRequestPage(UnlockRequestProps{}), map[string]int{"email": 1}},
		// The sign-out-everywhere form.
		{"dashboard", DashboardPage(busyDashboard()), map[string]int{"email": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, doc := render(t, tt.c)
			got := map[string]int{}
			for _, in := range elements(doc, "input") {
				kind, _ := attr(in, "type")
				if ac, _ := attr(in, "autocomplete"); ac == "new-password" {
					kind = ac
				}
				want, ok := bounds[kind]
				if !ok {
					continue
				}
				got[kind]++
				id, _ := attr(in, "id")
				for key, w := range want {
					if v, _ := attr(in, key); v != w {
						t.Errorf("%s field #%s: %s = %q, want %q", kind, id, key, v, w)
					}
				}
			}
			for kind, n := range tt.want {
				if got[kind] != n {
					t.Errorf("%d %s fields, want %d", got[kind], kind, n)
				}
			}
		})
	}
	t.Run("new password hint", func(t *testing.T) {
		_, doc := render(t, ResetConfirmPage(ResetConfirmProps{Token: "abc"}))
		want := "At least " + strconv.Itoa(auth.MinPasswordRunes) + " characters."
		if page := text(doc); !strings.Contains(page, want) {
			t.Errorf("reset form does not say %q:\n%s", want, page)
		}
	})
}
