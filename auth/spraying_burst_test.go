package auth_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
)

// TestSprayedBurstNeverPassesTheSprayLock: one password sent at once to
// many accounts, from as many addresses (a distributed spray), is checked
// on no more accounts than the spraying lock allows: each password check
// holds a place towards the password's lock as towards the account's, so
// the failures counted and the checks in flight never pass
// XCLOAK_SPRAY_ACCOUNTS together. Without the places, every account of
// the burst would have the password checked before the lock.
func TestSprayedBurstNeverPassesTheSprayLock(t *testing.T) {
	const burst = 12
	gather := newGatheringStore(burst)
	s := authtest.NewService(t, func(c *auth.Config) {
		c.SprayAccounts = 3
	}, func(d *auth.Deps) {
		gather.Store = d.Store
		d.Store = gather
	})
	email := func(i int) string { return fmt.Sprintf("user%d@example.com", i) }
	for i := range burst + 1 {
		if _, err := s.Service.CreateUser(t.Context(), email(i), fmt.Sprint("their own password ", i), false, "cli"); err != nil {
			t.Fatal(err)
		}
	}
	login := func(i int) error {
		_, err := s.Service.Login(t.Context(), auth.LoginRequest{Email: email(i), Password: "Summer2026!",
			Client: client(fmt.Sprintf("198.51.%d.7", 100+i))})
		return err
	}
	gather.gather(time.Second)
	errs := make([]error, burst)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() { errs[i] = login(i) })
	}
	wg.Wait()
	checked, refused := checkedAndRefused(t, errs)
	accounts := s.Config.SprayAccounts
	if checked < 1 || checked > accounts || checked+refused != burst {
		t.Fatalf("one password on %d accounts at once: checked on %d, refused on %d; want checked on between 1 and %d", burst, checked, refused, accounts)
	}
	if err := login(burst); (checked == accounts) != errors.Is(err, auth.ErrLimited) {
		t.Fatalf("the password on one more account after %d checked: %v", checked, err)
	}
}
