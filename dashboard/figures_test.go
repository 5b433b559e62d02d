package dashboard

import "testing"

func TestParsePeriod(t *testing.T) {
	for _, s := range []string{"5m", "1h", "24h"} {
		p, err := ParsePeriod(s)
		if err != nil || p.String() != s {
			t.Errorf("ParsePeriod(%q) = %v, %v", s, p, err)
		}
	}
	for _, s := range []string{"", "5", "7d", "1H", "24h ", "-5m"} {
		if _, err := ParsePeriod(s); err != ErrInvalidPeriod {
			t.Errorf("ParsePeriod(%q): err %v, want ErrInvalidPeriod", s, err)
		}
	}
}
