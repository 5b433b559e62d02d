// Package urlport checks the port of a URL a setting names. net/url takes
// any run of digits as a port, so a typo such as 80800 or 637900 passes
// url.Parse and fails only later, on every connection.
package urlport

import "strconv"

// Valid reports whether port, as url.URL.Port gives it, is none or a
// number a connection can use, 1 to 65535.
func Valid(port string) bool {
	if port == "" {
		return true
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}
