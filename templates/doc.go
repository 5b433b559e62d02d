// Package templates renders XCloak's end-user pages: sign-in, account,
// password reset and error pages.
//
// Each page is a templ component that takes an explicit props struct and
// nothing else: templates touch no database and no HTTP request, so the
// handlers in package web decide what to show and these components decide
// only how it looks. Every page shares one layout that links the stylesheet
// at /static/app.css and carries no inline styles or scripts, so the pages
// work under a Content-Security-Policy that allows only same-origin
// stylesheets and scripts.
//
// Form field names are exported as constants (FieldEmail and friends) so
// that handlers read back exactly the names the forms send.
//
// The *_templ.go files are generated from the .templ files with
// "go tool templ generate" and are kept in the repository.
package templates
