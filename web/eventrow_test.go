package web

import (
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
)

// TestEventRowRareKinds: the rare events a security team must not miss are
// said in words on the event search, not shown as their raw kind.
func TestEventRowRareKinds(t *testing.T) {
	for _, tc := range []struct {
		e          dashboard.StoredEvent
		what, said string
	}{
		{dashboard.StoredEvent{Kind: auth.EventRecoveryCodeUsed, Detail: map[string]string{"left": "7"}},
			"Recovery code used for the second step", "7 left"},
		{dashboard.StoredEvent{Kind: auth.EventPasskeyCloned, Detail: map[string]string{"factor": "3"}},
			"Passkey refused: its signature counter went back", "The authenticator may have been copied"},
	} {
		if row := eventRow(tc.e); row.What != tc.what || row.Detail != tc.said {
			t.Errorf("eventRow(%s) = %q, %q; want %q, %q", tc.e.Kind, row.What, row.Detail, tc.what, tc.said)
		}
	}
}
