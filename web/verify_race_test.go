package web_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/xcloak/xcloak/internal/xcloaktest"
)

// TestSignInLinkOnceUnderRace: a sign-in link confirmed by many browsers
// at once, against the real Postgres, signs in one of them only.
func TestSignInLinkOnceUnderRace(t *testing.T) {
	env, base := verifyEnv(t)
	u := env.AddUser(t, "ann@example.com", "the password", false)
	token := heldToken(t, env, base, "127.0.0.1", "ann@example.com", "the password")
	const n = 12
	var mu sync.Mutex
	got := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		c := xcloaktest.Client(t, fmt.Sprintf("127.0.88.%d", i+1))
		wg.Go(func() {
			<-start
			resp, _ := post(t, c, base+"/api/v1/sign-in/confirm", jsonType, fmt.Sprintf(`{"token":%q}`, token))
			mu.Lock()
			got[resp.StatusCode]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	var sessions, devices int
	env.DB.QueryRow(context.Background(), `SELECT count(*) FROM sessions WHERE user_id = $1`, u.ID).Scan(&sessions)
	env.DB.QueryRow(context.Background(), `SELECT count(*) FROM devices WHERE user_id = $1`, u.ID).Scan(&devices)
	t.Logf("answers %v, sessions %d, devices %d", got, sessions, devices)
	if got[http.StatusOK] != 1 || got[http.StatusBadRequest] != n-1 || sessions != 1 || devices != 1 {
		t.Errorf("answers %v, sessions %d, devices %d; want one 200, one session, one device", got, sessions, devices)
	}
}
