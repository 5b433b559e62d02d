package auth_test

import (
	"context"
	"errors"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
)

// panickyStore panics reading users for a request whose context carries
// panicKey, as a bug in a store would; net/http recovers the request's
// panic and the server goes on. The background work's reads, under
// contexts of their own, are left alone.
type panickyStore struct{ *authtest.Store }

type panicKey struct{}

func (s *panickyStore) UserByEmail(ctx context.Context, email string) (auth.User, error) {
	if ctx.Value(panicKey{}) != nil {
		panic("store bug")
	}
	return s.Store.UserByEmail(ctx, email)
}

// TestGiveWayMarksBalanced: whatever a sign-in ends in (a rejection, a
// wrong or right password, an unknown account, a valid cookie of a known
// or forgotten device, a request cancelled before its hash, a panic
// after its admission), nothing is left counted in flight once it
// returns: a mark left behind would make every rejection wait 200 ms and
// every other hash 100 ms for good.
func TestGiveWayMarksBalanced(t *testing.T) {
	hasher, _ := giveWayHasher(t)
	store := &panickyStore{Store: authtest.NewStore()}
	s := authtest.NewService(t, func(c *auth.Config) { c.Limits.SetCount(auth.RuleLoginIP, 5) },
		withStore(store), func(d *auth.Deps) { d.Hasher = hasher }).Service
	user, returning := returningAnn(t, s)
	ann := returning
	ann.DeviceCookie = ""
	returning.Client = client("198.51.100.8")

	balanced := func(what string) {
		t.Helper()
		if checks, ret := auth.InFlight(hasher); checks != 0 || ret != 0 {
			t.Fatalf("after %s: %d checks and %d returning sign-ins in flight, want none", what, checks, ret)
		}
	}
	login := func(what string, ctx context.Context, req auth.LoginRequest) error {
		t.Helper()
		_, err := s.Login(ctx, req)
		balanced(what)
		return err
	}
	login("a right password", t.Context(), ann)
	login("a returning browser", t.Context(), returning)
	wrong := returning
	wrong.Password = "wrong"
	login("a returning browser's wrong password", t.Context(), wrong)
	login("an unknown account", t.Context(), auth.LoginRequest{Email: "nobody@example.com", Password: "x", Client: client("192.0.2.9")})

	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	login("a request ended before its hash", cancelled, auth.LoginRequest{Email: "ann@example.com", Password: "x", Client: client("192.0.2.10")})
	login("a returning browser's request ended", cancelled, returning)

	panicking := context.WithValue(t.Context(), panicKey{}, true)
	for _, req := range []auth.LoginRequest{ann, returning} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic from the store")
				}
			}()
			s.Login(panicking, req)
		}()
		balanced("a panic after the admission")
	}

	devices, err := store.AccountDevices(t.Context(), user.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devices {
		forgetDevice(t, store, user, d.PublicID)
	}
	if err := login("a forgotten device", t.Context(), wrong); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatalf("a forgotten device's wrong password: %v, want ErrInvalidCredentials", err)
	}

	// The address's quota spent: rejections, with and without a cookie.
	for i := 0; i < 6; i++ {
		if err := login("a rejection", t.Context(), auth.LoginRequest{Email: "nobody@example.com", Password: "x", Client: client("192.0.2.9")}); i >= 4 && !errors.Is(err, auth.ErrLimited) {
			t.Fatalf("attempt %d: %v, want ErrLimited", i, err)
		}
	}
	for i := 0; i < 6; i++ {
		login("a returning browser's rejection", t.Context(), returning)
	}
	if got := hasher.Stats(); got != (auth.HasherStats{}) {
		t.Fatalf("stats %+v, want nothing running or waiting", got)
	}
}
