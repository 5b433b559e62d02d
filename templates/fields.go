package templates

// Names of the form fields the pages send. Handlers read the posted values
// with these names so that a renamed field cannot silently break a form.
const (
	// FieldEmail carries the email address on the sign-in and reset-request forms.
	FieldEmail = "email"
	// FieldPassword carries the current password on the sign-in form and the
	// new password on the reset-confirm form.
	FieldPassword = "password"
	// FieldConfirm carries the repeated new password on the reset-confirm form.
	FieldConfirm = "password_confirm"
)

// Limits the forms declare to the browser. The server enforces its own
// limits; these only spare users a round trip for input that cannot succeed.
const (
	// MaxEmailLength is the longest address accepted in an email field
	// (the practical limit of a forward path in SMTP).
	MaxEmailLength = 254
	// MinPasswordLength is the shortest new password the reset form accepts.
	MinPasswordLength = 8
	// MaxPasswordLength is the longest new password the reset form accepts.
	MaxPasswordLength = 1024
)
