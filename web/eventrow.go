package web

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/templates"
)

// eventRow puts every kind of stored event into words, for the event
// search and the dashboard's latest events. The words of sign-ins,
// refusals by a limit, mailed links and second steps, the kinds a flood
// and a user's day are made of, are here; those of attacks (attack.go)
// and of accounts and API keys administered (users.go) beside their
// pages.

// eventRow puts a stored event into words.
func eventRow(e dashboard.StoredEvent) templates.EventRow {
	row := templates.EventRow{At: e.At, Account: e.Account, Source: e.Source, What: e.Kind}
	switch e.Kind {
	case auth.EventLoginRejected, auth.EventResetRejected, auth.EventUnlockRejected, auth.EventVerificationRejected,
		auth.EventMFARejected:
		refusalEventRow(&row, e)
	case auth.EventLoginSucceeded, auth.EventLoginFailed, auth.EventLoginInvalid, auth.EventLoginUnavailable,
		auth.EventAttemptAllowed, auth.EventResetFailed:
		signInEventRow(&row, e)
	case auth.EventUnlockRequested, auth.EventResetMailDropped, auth.EventPasswordSprayed:
		linkEventRow(&row, e)
	case auth.EventMFARequired, auth.EventMFAFailed:
		secondStepEventRow(&row, e)
	case auth.EventLockout:
		row.What = "Account locked"
		if e.Detail["device"] != "" {
			row.What = "Known device locked"
		}
		// An administrator's lock names them, so that it does not read
		// as the failures' lockout.
		var parts []string
		if by := adminBy(e.Detail["by"]); by != "" {
			parts = append(parts, by)
		}
		if l := e.Detail["level"]; l != "" {
			parts = append(parts, "Level "+l)
		}
		if until, err := time.Parse(time.RFC3339, e.Detail["until"]); err == nil {
			parts = append(parts, "until "+until.UTC().Format("2 Jan 15:04 UTC"))
		}
		row.Detail = strings.Join(parts, ", ")
	case auth.EventLockoutEnded:
		row.What = "Lockout ended"
		row.Detail = "Its time ran out"
	case auth.EventUnlock:
		row.What = "Lockout lifted"
		if step := lockSteps[e.Detail["step"]]; step != "" {
			// One of the second step's locks alone (auth.Service.UnlockStep).
			row.What = "Lock lifted: " + step
		}
		switch by := e.Detail["by"]; {
		case adminBy(by) != "":
			row.Detail = adminBy(by)
		case by == "success":
			row.Detail = "By a successful sign-in after it ended"
		case by == "reset":
			row.Detail = "By a password reset"
		case by != "":
			row.Detail = "By " + by
		}
	case auth.EventResetRequested:
		row.What = "Password reset requested"
		// Named when an administrator sent the link, not the owner.
		row.Detail = adminBy(e.Detail["by"])
	case auth.EventResetCompleted:
		row.What = "Password changed by reset"
	case auth.EventPasswordChanged:
		row.What = "Password changed by its owner"
		row.Detail = "Every other session ended"
	case auth.EventSessionEnded:
		row.What = "Session ended by its owner"
		switch e.Detail["scope"] {
		case "current":
			row.What = "Signed out from the session list"
		case "others":
			row.What = "Signed out everywhere else by its owner"
			if n := e.Detail["count"]; n != "" {
				row.Detail = endedCount(n)
			}
		}
	case auth.EventDeviceForgotten:
		row.What = "Known device forgotten by its owner"
	case auth.EventNewDevice:
		row.What = "Sign-in from a new device"
	case auth.EventUnlockConfirmed:
		row.What = "Unlock link used"
		row.Detail = "The browser became a known device"
	case auth.EventAttackStarted, auth.EventAttackEnded, auth.EventAttackSwitched:
		attackEventRow(&row, e)
	case auth.EventVerificationRequired:
		row.What = "Sign-in held for new-device verification"
		row.Detail = "The right password from a new browser; a sign-in link was mailed"
		if e.Detail["breached"] == "true" {
			row.Detail = "A breached password from a new browser; the owner was asked to choose a new one"
		}
	case auth.EventNewDeviceSignedOut:
		row.What = "New browser signed out"
		row.Detail = "It first signed in moments before attack mode started"
	case auth.EventVerificationConfirmed:
		row.What = "Sign-in link used"
		row.Detail = "The browser that used it is signed in and a known device"
	case auth.EventFactorAdded:
		row.What = "Second factor added by its owner"
	case auth.EventFactorRemoved:
		row.What = "Second factor removed by its owner"
		if by := adminBy(e.Detail["by"]); by != "" {
			row.What = "Second factors removed"
			row.Detail = by
		}
	case auth.EventRecoveryCodesRegenerated:
		row.What = "New recovery codes made by their owner"
		row.Detail = "The old ones no longer work"
	case auth.EventRecoveryCodeUsed:
		row.What = "Recovery code used for the second step"
		if left := e.Detail["left"]; left != "" {
			row.Detail = left + " left"
		}
	case auth.EventPasskeyCloned:
		row.What = "Passkey refused: its signature counter went back"
		row.Detail = "The authenticator may have been copied"
	case auth.EventMFALockout:
		row.What = "Second step locked after wrong codes"
		if until, err := time.Parse(time.RFC3339, e.Detail["until"]); err == nil {
			row.Detail = "Until " + until.UTC().Format("2 Jan 15:04 UTC")
		}
	case auth.EventUserCreated, auth.EventUserDisabled, auth.EventUserEnabled, auth.EventUserDeleted, auth.EventUserPromoted,
		auth.EventUserDemoted, auth.EventPasswordSet:
		adminEventRow(&row, e)
	case auth.EventAPIKeyCreated, auth.EventAPIKeyRevoked:
		apiKeyEventRow(&row, e)
	case auth.EventEventsExported:
		row.What = "Security events exported"
		row.Detail = adminBy(e.Detail["by"])
		if n := e.Detail["rows"]; n != "" {
			row.Detail += "; " + n + " events"
		}
	case auth.EventSignedOutEverywhere:
		row.What = "Signed out everywhere"
		row.Detail = adminBy(e.Detail["by"])
	}
	if times := foldedTimes(e); times != "" {
		if row.Detail != "" {
			row.Detail += "; "
		}
		row.Detail += times
	}
	return row
}

// refusalWhat says what each kind of refusal by a limit refused.
var refusalWhat = map[string]string{
	auth.EventLoginRejected:        "Sign-in refused by a limit",
	auth.EventResetRejected:        "Password reset refused by a limit",
	auth.EventUnlockRejected:       "Unlock refused by a limit",
	auth.EventVerificationRejected: "Sign-in link refused by a limit",
	auth.EventMFARejected:          "Second step refused by a limit",
}

// refusalEventRow fills row for a refusal by a limit: the limit's label
// (its name when this version has no such rule) and the application that
// asked, for the decision API's.
func refusalEventRow(row *templates.EventRow, e dashboard.StoredEvent) {
	row.What = refusalWhat[e.Kind]
	rule := e.Detail["rule"]
	label := auth.RuleLabel(rule)
	if label == "" {
		label = rule
	}
	var parts []string
	if label != "" {
		parts = append(parts, label)
	}
	if app := appLabel(e); app != "" {
		parts = append(parts, "asked by application "+app)
	}
	if e.Detail["held"] == "true" {
		parts = append(parts, "on a held sign-in")
	}
	row.Detail = strings.Join(parts, ", ")
	if label == "" {
		row.Detail = capitalised(row.Detail)
	}
}

// foldedTimes says, for a row that stands for many events (a flood's
// refusals folded by the recorder, or a network's events past its budget
// summed up), how many and when the last was; "" for a row of one, whose
// "count" may count something else (auth.CountsEvents).
func foldedTimes(e dashboard.StoredEvent) string {
	if !auth.CountsEvents(e.Kind, e.Detail) {
		return ""
	}
	n, err := strconv.Atoi(e.Detail["count"])
	if err != nil || n <= 1 {
		return ""
	}
	times := groupThousands(n) + " times"
	if last, err := time.Parse(time.RFC3339Nano, e.Detail["last"]); err == nil {
		times += ", the last at " + last.UTC().Format("15:04:05 UTC")
	}
	return times
}

// groupThousands writes n with a comma between each group of three digits.
func groupThousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// reportedBy says which application reported an event through the
// decision API; "" for XCloak's own sign-ins.
func reportedBy(e dashboard.StoredEvent) string {
	if app := appLabel(e); app != "" {
		return "Reported by application " + app
	}
	return ""
}

// appLabel names the application of an event of the decision API, and
// the key where the event names one apart (while two keys speak for the
// application), so that the row says which key to revoke; "" for XCloak's
// own.
func appLabel(e dashboard.StoredEvent) string {
	app := e.Detail["app"]
	if key := e.Detail["key"]; app != "" && key != "" {
		return app + " (key " + key + ")"
	}
	return app
}

// signedInWith names the second step or passkey a sign-in passed.
var signedInWith = map[string]string{
	"totp":     "With an authenticator code",
	"recovery": "With a recovery code",
	"passkey":  "With a passkey",
}

// signInEventRow fills row for the outcome of a sign-in that reached its
// password, or of one that was not decided.
func signInEventRow(row *templates.EventRow, e dashboard.StoredEvent) {
	switch e.Kind {
	case auth.EventLoginSucceeded:
		row.What = "Signed in"
		if e.Detail["device"] == "new" {
			row.What = "Signed in from a new device"
		}
		row.Detail = reportedBy(e)
		if with, ok := signedInWith[e.Detail["factor"]]; ok {
			row.Detail = with
		}
		if e.Detail["password"] == "breached" {
			row.Detail = "With a breached password"
		}
		if e.Detail["challenged"] == "true" {
			// Not signed in: the application was told to verify the
			// user another way, and it counts as a failure.
			row.What = "Right password, challenged"
			row.Detail = "Application " + appLabel(e) + " was told to verify the user another way"
		}
	case auth.EventLoginFailed:
		row.What = "Sign-in failed: wrong password or no such account"
		row.Detail = reportedBy(e)
	case auth.EventLoginInvalid:
		row.What = "Malformed sign-in refused"
		row.Detail = "No valid email, or a password empty or too long"
	case auth.EventLoginUnavailable:
		row.What = "Sign-in not decided"
		row.Detail = "Its limits or the database could not be reached, or the password checks were full"
		if app := appLabel(e); app != "" {
			row.Detail += "; asked by application " + app
		}
	case auth.EventAttemptAllowed:
		row.What = "Sign-in allowed for an application"
		row.Detail = "Asked by application " + appLabel(e)
		if e.Detail["challenge"] == "true" {
			row.Detail += ", with new-device verification"
		}
	case auth.EventResetFailed:
		row.What = "Password reset failed"
		row.Detail = reportedBy(e)
	}
}

// droppedLink names the link a mail that was not sent held.
var droppedLink = map[string]string{
	"":                 "A reset link",
	"sign_in":          "A sign-in link",
	"unlock":           "An unlock link",
	"new_device":       "A new-device notice",
	"lockout":          "A lockout notice",
	"factor":           "A second-factor notice",
	"password_changed": "A password-change notice",
}

// dropReason says why a mail was not sent.
var dropReason = map[string]string{
	auth.DropQueueFull:    "the mail queue was full",
	auth.DropDomainLimit:  "its domain had its limit of mails",
	auth.DropAccountLimit: "the account had its limit of held sign-ins' mails",
	auth.DropSendFailed:   "the mail server refused it or did not answer",
	auth.DropUnavailable:  "the database or the limits could not be reached",
}

// linkEventRow fills row for a mailed link asked for and for a mail that
// was not sent.
func linkEventRow(row *templates.EventRow, e dashboard.StoredEvent) {
	switch e.Kind {
	case auth.EventUnlockRequested:
		row.What = "Unlock link requested"
	case auth.EventResetMailDropped:
		row.What = "Mail not sent"
		link, ok := droppedLink[e.Detail["link"]]
		if !ok {
			link = "A mail"
		}
		row.Detail = link
		if reason, ok := dropReason[e.Detail["reason"]]; ok {
			row.Detail += ": " + reason
		}
	case auth.EventPasswordSprayed:
		row.What = "Password refused on every account: tried on many"
		var parts []string
		if n := e.Detail["accounts"]; n == "1" {
			parts = append(parts, "1 account")
		} else if n != "" {
			parts = append(parts, n+" accounts")
		}
		if until, err := time.Parse(time.RFC3339, e.Detail["until"]); err == nil {
			parts = append(parts, "refused until "+until.UTC().Format("2 Jan 15:04 UTC"))
		}
		row.Detail = strings.Join(parts, ", ")
	}
}

// secondStepEventRow fills row for a second step asked for or failed.
func secondStepEventRow(row *templates.EventRow, e dashboard.StoredEvent) {
	var parts []string
	switch e.Kind {
	case auth.EventMFARequired:
		row.What = "Second step asked for"
	case auth.EventMFAFailed:
		row.What = "Wrong second-step code"
		if e.Detail["kind"] == string(auth.FactorWebAuthn) {
			row.What = "Passkey refused"
			if why := e.Detail["reason"]; why != "" {
				parts = append(parts, why)
			}
		}
		if e.Detail["reused"] == "true" {
			parts = append(parts, "A code used already")
		}
	}
	if e.Detail["held"] == "true" {
		parts = append(parts, "on a held sign-in")
	}
	row.Detail = capitalised(strings.Join(parts, ", "))
}

// capitalised returns s with its first letter upper-case.
func capitalised(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	if size == 0 || r == utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[size:]
}
