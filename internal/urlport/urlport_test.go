package urlport

import "testing"

func TestValid(t *testing.T) {
	for port, want := range map[string]bool{
		"": true, "1": true, "443": true, "0443": true, "65535": true,
		"0": false, "65536": false, "637900": false, "99999999999999999999": false, "-1": false, "x": false,
	} {
		if got := Valid(port); got != want {
			t.Errorf("Valid(%q) = %v, want %v", port, got, want)
		}
	}
}
