package auth_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
)

// heldStore is an in-memory store whose next SessionByHash, once armed,
// reads the session and then waits for release before answering: a read
// that is slow to come back (a busy database), holding what it read.
type heldStore struct {
	*authtest.Store
	mu      sync.Mutex
	release chan struct{}
}

func (s *heldStore) arm() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release = make(chan struct{})
	return s.release
}

func (s *heldStore) SessionByHash(ctx context.Context, tokenHash []byte, now time.Time) (auth.Session, error) {
	sess, err := s.Store.SessionByHash(ctx, tokenHash, now)
	s.mu.Lock()
	release := s.release
	s.release = nil
	s.mu.Unlock()
	if release != nil {
		<-release
	}
	return sess, err
}

// TestProxySessionNeverAnswersFromAReadOlderThanTheBound: a session ended
// on another replica stops passing within the cache's second even when a
// read of it that began before the end is still running: a lookup more
// than a second after the end does not take that read's answer.
func TestProxySessionNeverAnswersFromAReadOlderThanTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &heldStore{Store: authtest.NewStore()}
		s := authtest.NewService(t, nil, func(d *auth.Deps) { d.Store = store })
		ctx := context.Background()
		if _, err := s.CreateUser(ctx, "ann@example.com", "correct horse battery", false, "cli"); err != nil {
			t.Fatal(err)
		}
		res, err := s.Login(ctx, auth.LoginRequest{Email: "ann@example.com", Password: "correct horse battery",
			Client: auth.Client{Addr: netip.MustParseAddr("192.0.2.1")}})
		if err != nil {
			t.Fatal(err)
		}
		token := res.Session.Token

		// A lookup whose read found the live session and is slow to
		// come back.
		release := store.arm()
		first := make(chan error, 1)
		go func() {
			_, err := s.ProxySession(ctx, token)
			first <- err
		}()
		synctest.Wait()

		// Another replica ends the session; more than the bound passes.
		sum := sha256.Sum256([]byte(token))
		if err := store.DeleteSession(ctx, sum[:]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second + time.Millisecond)

		second := make(chan error, 1)
		go func() {
			_, err := s.ProxySession(ctx, token)
			second <- err
		}()
		synctest.Wait()
		close(release)
		<-first
		if err := <-second; !errors.Is(err, auth.ErrNoSession) {
			t.Errorf("a lookup %s after the session ended elsewhere: err %v, want ErrNoSession", time.Second, err)
		}
	})
}
