package web

import "strings"

// formActionSources are the Content-Security-Policy sources, after 'self',
// that XCloak's forms may lead to: every protected host, on any port, over
// https (and http with insecure cookies). Browsers hold the redirects that
// answer a form to form-action as well as the form's own target, and the
// sign-in and sign-out forms redirect to the protected page their rd
// names (safeRedirect allows no other host); with 'self' alone, the
// browser would stop there, signed in but not sent back. A wildcard
// pattern keeps its meaning in CSP: *.example.com covers every subdomain,
// at any depth, and not example.com itself.
func formActionSources(hosts ProtectedHosts, allowHTTP bool) string {
	schemes := []string{"https"}
	if allowHTTP {
		schemes = append(schemes, "http")
	}
	var b strings.Builder
	for _, p := range hosts {
		host := p.Host
		if p.Wildcard {
			host = "*." + host
		}
		for _, scheme := range schemes {
			b.WriteString(" " + scheme + "://" + host + ":*")
		}
	}
	return b.String()
}
