package templates

// Names of the form fields the pages send. Handlers read the posted values
// with these names so that a renamed field cannot silently break a form.
const (
	// FieldEmail carries the email address on the sign-in and reset-request forms.
	FieldEmail = "email"
	// FieldPassword carries the current password on the sign-in form and the
	// new password on the reset-confirm form.
	FieldPassword = "password"
	// FieldConfirm carries the repeated new password on the reset-confirm
	// and password-change forms.
	FieldConfirm = "password_confirm"
	// FieldCurrentPassword carries the current password on the
	// password-change form.
	FieldCurrentPassword = "current_password"
	// FieldNewPassword carries the new password on the password-change form.
	FieldNewPassword = "new_password"
	// FieldReturn carries, on the sign-in and sign-out forms, the page of
	// a protected application to return to afterwards (the rd parameter).
	FieldReturn = "rd"
)

// The forms declare auth's bounds to the browser (maxlength from
// auth.MaxEmailBytes and auth.MaxPasswordBytes, minlength from
// auth.MinPasswordRunes) rather than numbers of their own, so a changed bound
// cannot leave a form asking for what the server refuses. The server enforces
// the bounds itself; the attributes only spare users a round trip.
