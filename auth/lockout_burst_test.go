package auth_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/ratelimit"
)

// gatheringStore holds every account lookup (a password about to be
// checked) until want of them are waiting, or none has come for a while:
// the sign-ins sent at once are then all checked at once, however quickly
// each would otherwise be done. Once released, lookups pass.
type gatheringStore struct {
	auth.Store
	want int

	mu      sync.Mutex
	waiting int
	passing bool
	arrived chan struct{}
	release chan struct{}
}

func newGatheringStore(want int) *gatheringStore {
	return &gatheringStore{want: want, passing: true, arrived: make(chan struct{}, want), release: make(chan struct{})}
}

func (s *gatheringStore) UserByEmail(ctx context.Context, email string) (auth.User, error) {
	s.mu.Lock()
	if s.passing {
		s.mu.Unlock()
		return s.Store.UserByEmail(ctx, email)
	}
	s.waiting++
	if s.waiting == s.want {
		s.open()
	}
	release := s.release
	s.mu.Unlock()
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	<-release
	return s.Store.UserByEmail(ctx, email)
}

// held returns how many lookups are held.
func (s *gatheringStore) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.passing {
		return 0
	}
	return s.waiting
}

// open lets every lookup through; s.mu is held.
func (s *gatheringStore) open() {
	if !s.passing {
		s.passing = true
		close(s.release)
	}
}

// gather holds the lookups from now on, and lets them through once want
// are waiting or none has arrived for quiet.
func (s *gatheringStore) gather(quiet time.Duration) {
	s.mu.Lock()
	s.passing, s.waiting, s.release = false, 0, make(chan struct{})
	s.mu.Unlock()
	go func() {
		for {
			select {
			case <-s.arrived:
			case <-time.After(quiet):
				s.mu.Lock()
				s.open()
				s.mu.Unlock()
				return
			}
		}
	}()
}

// TestBurstOfGuessesNeverPassesTheLockout: wrong passwords sent at once to
// an account, from a known device, or as the current password of a change,
// are never checked past the lockout's threshold, however many the
// sign-in limits admit: the attempts in flight hold their places towards
// the lock until each failure is counted. The others are refused as the
// lock refuses, before any hash.
func TestBurstOfGuessesNeverPassesTheLockout(t *testing.T) {
	const burst = 12
	for _, tc := range []struct {
		name          string
		known, change bool
	}{{"sign-in", false, false}, {"known device", true, false}, {"password change", false, true}} {
		known := tc.known
		t.Run(tc.name, func(t *testing.T) {
			gather := newGatheringStore(burst)
			s := authtest.NewService(t, func(c *auth.Config) {
				c.Lockout.Threshold = 3
				c.Limits.SetCount(auth.RuleLoginAccount, 100)
				c.Limits.SetCount(auth.RuleLoginDevice, 100)
				c.Limits.SetCount(auth.RuleLoginIP, 100)
			}, func(d *auth.Deps) {
				gather.Store = d.Store
				d.Store = gather
			})
			const email = "fay@example.com"
			if _, err := s.Service.CreateUser(t.Context(), email, "correct horse", false, "cli"); err != nil {
				t.Fatal(err)
			}
			// Signed in once, before the burst is gathered: a session to
			// change the password of, a known device.
			first, err := s.Service.Login(t.Context(), auth.LoginRequest{Email: email, Password: "correct horse", Client: client("192.0.2.9")})
			if err != nil {
				t.Fatal(err)
			}
			device := ""
			if known {
				device = first.Device.Value
			}
			gather.gather(time.Second)

			errs := make([]error, burst)
			var wg sync.WaitGroup
			for i := range burst {
				wg.Go(func() {
					guess := fmt.Sprint("guess ", i)
					if tc.change {
						_, errs[i] = s.Service.ChangePassword(t.Context(), auth.PasswordChange{
							Session: first.Session.Token, Current: guess, New: "a new one, nowhere leaked", Client: client("192.0.2.9")})
						return
					}
					_, errs[i] = s.Service.Login(t.Context(), auth.LoginRequest{
						Email: email, Password: guess, Client: client("192.0.2.9"), DeviceCookie: device})
				})
			}
			wg.Wait()
			checked, refused := checkedAndRefused(t, errs)
			threshold := s.Config.Lockout.Threshold
			if checked < 1 || checked > threshold || checked+refused != burst {
				t.Fatalf("%d guesses at once: %d checked, %d refused; want between 1 and the threshold, %d, checked", burst, checked, refused, threshold)
			}
			// The guesses checked locked it, or left it short: the right
			// password signs in only if they did not reach the threshold.
			_, err = s.Service.Login(t.Context(), auth.LoginRequest{Email: email, Password: "correct horse", Client: client("192.0.2.9"), DeviceCookie: device})
			if locked := checked == threshold; locked != errors.Is(err, auth.ErrLimited) {
				t.Fatalf("the right password after %d guesses checked: %v", checked, err)
			}
		})
	}
}

// checkedAndRefused counts the wrong passwords of a burst whose answers
// are errs: those checked (wrong credentials) and those refused (too many
// attempts, with a time to wait). Any other answer fails the test.
func checkedAndRefused(t *testing.T, errs []error) (checked, refused int) {
	t.Helper()
	for _, err := range errs {
		var limited *auth.LimitedError
		switch {
		case errors.Is(err, auth.ErrInvalidCredentials):
			checked++
		case errors.As(err, &limited) && limited.RetryAfter > 0:
			refused++
		default:
			t.Fatalf("a wrong password of the burst: %v; want wrong credentials or too many attempts", err)
		}
	}
	return checked, refused
}

// uncountingLimiter fails every failure counted towards an account's or a
// device's lockout, as a Redis that stalls on that call would.
type uncountingLimiter struct{ auth.Limiter }

func (l uncountingLimiter) Fail(ctx context.Context, name, id, attempt string) (ratelimit.Failure, error) {
	if name == auth.RuleLoginAccount || name == auth.RuleLoginDevice {
		return ratelimit.Failure{}, context.DeadlineExceeded
	}
	return l.Limiter.Fail(ctx, name, id, attempt)
}

// TestUncountedFailureKeepsItsPlace: a wrong password whose failure could
// not be counted (answered 503) keeps its place towards the lockout for as
// long as places last, rather than giving it back uncounted: a Redis that
// stalls after each hash lets no more guesses through than the threshold
// in that time, not as many as the limits admit.
func TestUncountedFailureKeepsItsPlace(t *testing.T) {
	s := authtest.NewService(t, func(c *auth.Config) {
		c.Lockout.Threshold = 3
		c.Limits.SetCount(auth.RuleLoginAccount, 100)
		c.Limits.SetCount(auth.RuleLoginIP, 100)
	}, func(d *auth.Deps) { d.Limiter = uncountingLimiter{d.Limiter} })
	const email = "gus@example.com"
	if _, err := s.Service.CreateUser(t.Context(), email, "correct horse", false, "cli"); err != nil {
		t.Fatal(err)
	}
	threshold := s.Config.Lockout.Threshold
	for i := range threshold {
		_, err := s.Service.Login(t.Context(), auth.LoginRequest{Email: email, Password: fmt.Sprint("guess ", i), Client: client("192.0.2.1")})
		if !errors.Is(err, auth.ErrUnavailable) {
			t.Fatalf("guess %d, its failure not counted: %v; want unavailable", i, err)
		}
	}
	_, err := s.Service.Login(t.Context(), auth.LoginRequest{Email: email, Password: "one more", Client: client("192.0.2.1")})
	if !errors.Is(err, auth.ErrLimited) {
		t.Fatalf("after %d guesses whose failures went uncounted: %v; want refused", threshold, err)
	}
	// A right password gives its place back: however many sign-ins, no
	// place is left taken.
	other := "hal@example.com"
	if _, err := s.Service.CreateUser(t.Context(), other, "correct horse", false, "cli"); err != nil {
		t.Fatal(err)
	}
	for i := range threshold + 2 {
		if _, err := s.Service.Login(t.Context(), auth.LoginRequest{Email: other, Password: "correct horse", Client: client("192.0.2.2")}); err != nil {
			t.Fatalf("sign-in %d with the right password: %v", i+1, err)
		}
	}
}

// TestRetypedBurstTakesNoPlaces: a wrong password the account already
// failed with, sent many times at once (a user's client retrying, an
// attacker repeating a refused guess), is checked every time and refused
// by no place, since its failure is not counted again: it neither locks
// the account nor keeps its owner out.
func TestRetypedBurstTakesNoPlaces(t *testing.T) {
	const burst = 12
	gather := newGatheringStore(burst)
	s := authtest.NewService(t, func(c *auth.Config) {
		c.Lockout.Threshold = 3
		c.Limits.SetCount(auth.RuleLoginAccount, 100)
		c.Limits.SetCount(auth.RuleLoginIP, 100)
	}, func(d *auth.Deps) {
		gather.Store = d.Store
		d.Store = gather
	})
	const email = "ivy@example.com"
	if _, err := s.Service.CreateUser(t.Context(), email, "correct horse", false, "cli"); err != nil {
		t.Fatal(err)
	}
	login := func(password string) error {
		_, err := s.Service.Login(t.Context(), auth.LoginRequest{Email: email, Password: password, Client: client("192.0.2.3")})
		return err
	}
	// Short of the lock by one.
	for i := range s.Config.Lockout.Threshold - 1 {
		if err := login(fmt.Sprint("old password ", i)); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatal(err)
		}
	}
	gather.gather(5 * time.Second)
	errs := make([]error, burst)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() { errs[i] = login("old password 0") })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatalf("retyped password %d of %d at once: %v; want checked, a wrong password", i+1, burst, err)
		}
	}
	if err := login("correct horse"); err != nil {
		t.Fatalf("the right password after the retyped burst: %v; want signed in", err)
	}
}

// deadlineStore records the deadline of every account lookup's context,
// as the time left when it was made.
type deadlineStore struct {
	auth.Store
	mu   sync.Mutex
	left []time.Duration
}

func (s *deadlineStore) UserByEmail(ctx context.Context, email string) (auth.User, error) {
	left := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	s.mu.Lock()
	s.left = append(s.left, left)
	s.mu.Unlock()
	return s.Store.UserByEmail(ctx, email)
}

// TestPasswordCheckEndsBeforeItsPlaces: a password check runs under a
// deadline well inside the time its places towards the locks last, even
// when its caller set none, so that a database that stalls never lets a
// place run out under a check still under way, and more guesses than
// the threshold be checked.
func TestPasswordCheckEndsBeforeItsPlaces(t *testing.T) {
	store := &deadlineStore{}
	s := authtest.NewService(t, nil, func(d *auth.Deps) {
		store.Store = d.Store
		d.Store = store
	})
	const email = "joe@example.com"
	if _, err := s.Service.CreateUser(t.Context(), email, "correct horse", false, "cli"); err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	store.left = nil
	store.mu.Unlock()
	if _, err := s.Service.Login(context.Background(), auth.LoginRequest{Email: email, Password: "a guess", Client: client("192.0.2.4")}); !errors.Is(err, auth.ErrInvalidCredentials) {
		t.Fatal(err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.left) == 0 {
		t.Fatal("the password check looked no account up")
	}
	for _, left := range store.left {
		if left <= 0 || left > 45*time.Second {
			t.Errorf("the account looked up with %v left (-1: no deadline); want a bound well inside the places' minute", left)
		}
	}
}

// ttlLimiter records the ttl of every place taken towards a lock, with a
// decision (ratelimit.Rule.Place) or alone.
type ttlLimiter struct {
	auth.Limiter
	mu   sync.Mutex
	ttls []time.Duration
}

func (l *ttlLimiter) AllowAll(ctx context.Context, rules ...ratelimit.Rule) (ratelimit.Decision, error) {
	l.mu.Lock()
	for _, r := range rules {
		if r.Place != nil {
			l.ttls = append(l.ttls, r.Place.TTL)
		}
	}
	l.mu.Unlock()
	return l.Limiter.AllowAll(ctx, rules...)
}

func (l *ttlLimiter) BeginAttempt(ctx context.Context, name, id, attempt string, ttl time.Duration) (ratelimit.Begun, error) {
	l.mu.Lock()
	l.ttls = append(l.ttls, ttl)
	l.mu.Unlock()
	return l.Limiter.BeginAttempt(ctx, name, id, attempt, ttl)
}

// TestPlacesOutlastTheirCheckAndCount: a password check's places last
// longer than the check's deadline and then the bound of counting its
// failure, however long XCLOAK_REDIS_TIMEOUT allows that count, so that
// a check whose count is slow still holds its places until it is
// counted.
func TestPlacesOutlastTheirCheckAndCount(t *testing.T) {
	for _, redisTimeout := range []time.Duration{0, 5 * time.Second, time.Minute} {
		limiter := &ttlLimiter{}
		s := authtest.NewService(t, func(c *auth.Config) { c.RedisTimeout = redisTimeout }, func(d *auth.Deps) {
			limiter.Limiter = d.Limiter
			d.Limiter = limiter
		})
		if _, err := s.Service.CreateUser(t.Context(), "kim@example.com", "correct horse", false, "cli"); err != nil {
			t.Fatal(err)
		}
		limiter.mu.Lock()
		limiter.ttls = nil
		limiter.mu.Unlock()
		if _, err := s.Service.Login(t.Context(), auth.LoginRequest{Email: "kim@example.com", Password: "a guess", Client: client("192.0.2.5")}); !errors.Is(err, auth.ErrInvalidCredentials) {
			t.Fatal(err)
		}
		limiter.mu.Lock()
		ttls := limiter.ttls
		limiter.mu.Unlock()
		count := max(redisTimeout, ratelimit.DefaultTimeout) + 5*time.Second
		if len(ttls) != 2 {
			t.Fatalf("XCLOAK_REDIS_TIMEOUT %v: %d places taken, want the account's and the password's", redisTimeout, len(ttls))
		}
		for _, ttl := range ttls {
			if ttl < time.Minute || ttl <= 30*time.Second+count {
				t.Errorf("XCLOAK_REDIS_TIMEOUT %v: a place of %v; want at least a minute, and past the check's 30 s and its count's %v", redisTimeout, ttl, count)
			}
		}
	}
}

// placeCounter records, for each decision, the rules it took a place for
// (ratelimit.Rule.Place), and counts the places begun apart from one.
type placeCounter struct {
	auth.Limiter
	mu     sync.Mutex
	placed [][]string
	begun  int
}

func (l *placeCounter) AllowAll(ctx context.Context, rules ...ratelimit.Rule) (ratelimit.Decision, error) {
	var names []string
	for _, r := range rules {
		if r.Place != nil {
			names = append(names, r.Name)
		}
	}
	l.mu.Lock()
	l.placed = append(l.placed, names)
	l.mu.Unlock()
	return l.Limiter.AllowAll(ctx, rules...)
}

func (l *placeCounter) BeginAttempt(ctx context.Context, name, id, attempt string, ttl time.Duration) (ratelimit.Begun, error) {
	l.mu.Lock()
	l.begun++
	l.mu.Unlock()
	return l.Limiter.BeginAttempt(ctx, name, id, attempt, ttl)
}

// TestSignInTakesItsPlacesWithTheDecision: a sign-in whose places are
// free takes both, the account's and the password's, in its decision's
// one round trip, and begins none apart from it: where a sign-in cost
// three scripts in Redis before its hash, it costs one.
func TestSignInTakesItsPlacesWithTheDecision(t *testing.T) {
	limiter := &placeCounter{}
	s := authtest.NewService(t, nil, func(d *auth.Deps) {
		limiter.Limiter = d.Limiter
		d.Limiter = limiter
	})
	if _, err := s.Service.CreateUser(t.Context(), "lou@example.com", "correct horse", false, "cli"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		password string
		err      error
	}{{"a wrong password", "a guess", auth.ErrInvalidCredentials}, {"the right one", "correct horse", nil}} {
		limiter.mu.Lock()
		limiter.placed, limiter.begun = nil, 0
		limiter.mu.Unlock()
		_, err := s.Service.Login(t.Context(), auth.LoginRequest{Email: "lou@example.com", Password: tc.password, Client: client("192.0.2.6")})
		if !errors.Is(err, tc.err) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.err)
		}
		limiter.mu.Lock()
		placed, begun := limiter.placed, limiter.begun
		limiter.mu.Unlock()
		var with [][]string
		for _, p := range placed {
			if len(p) > 0 {
				with = append(with, p)
			}
		}
		want := fmt.Sprint([][]string{{auth.RuleLoginAccount, auth.RuleLoginPassword}})
		if fmt.Sprint(with) != want || begun != 0 {
			t.Errorf("%s: decisions with places %v, places begun apart %d; want %s and none", tc.name, with, begun, want)
		}
	}
}
