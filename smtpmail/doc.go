// Package smtpmail delivers auth's mail through an SMTP server.
//
// It reads the server from one URL (see ParseURL), so a single setting holds
// host, port, credentials, sender and how the connection is protected, and
// its Mailer satisfies auth.Mailer. It knows nothing of what the mail says:
// auth writes the message and checks it, and this package only carries it.
package smtpmail
