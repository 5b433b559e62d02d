package auth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/auth/authtest"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/postgres"
)

// lostReply writes through to its store, but answers its first write with
// an error, as a COPY that Postgres committed does when the connection
// drops, or the flush's timeout ends the query, before the answer comes.
type lostReply struct {
	auth.EventStore
	mu   sync.Mutex
	lost bool
}

func (s *lostReply) InsertEvents(ctx context.Context, id auth.EventBatchID, batch []auth.Event) error {
	if err := s.EventStore.InsertEvents(ctx, id, batch); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.lost {
		s.lost = true
		return errors.New("read tcp: connection reset by peer")
	}
	return nil
}

// accountHook counts the rows it hears by account.
type accountHook struct {
	mu   sync.Mutex
	rows map[string]int
}

func (h *accountHook) EventsWritten(rows []auth.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range rows {
		h.rows[e.Account]++
	}
}

func (h *accountHook) Run(context.Context) {}

// TestLostReplyWritesOnce: a batch Postgres wrote whose answer was lost
// goes again, and is found written: each event is stored once, and its
// audit line and hook (webhooks) come once, after the write that is
// answered.
func TestLostReplyWritesOnce(t *testing.T) {
	_, pool := testenv.Schema(t)
	store := postgres.New(pool)
	limiter, err := authtest.NewLimiter(auth.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := auth.NewHasher(fastParams, 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cfg := auth.DefaultConfig()
	cfg.Secret = []byte("0123456789abcdef0123456789abcdef")
	cfg.PublicURL, _ = url.Parse("https://login.example.test/")
	cfg.AuditLog = true
	var audit bytes.Buffer
	hook := &accountHook{rows: map[string]int{}}
	svc, err := auth.NewService(cfg, auth.Deps{Store: store, Limiter: limiter, Hasher: hasher, Mailer: &authtest.Mailer{},
		Logger: slog.New(slog.NewJSONHandler(&audit, nil)), Events: &lostReply{EventStore: store},
		Counter: &authtest.EventCounter{}, Hook: hook})
	if err != nil {
		t.Fatal(err)
	}
	accounts := []string{"ann@example.com", "bob@example.com", "cid@example.com"}
	for _, a := range accounts {
		if _, err := svc.CreateUser(t.Context(), a, "a long password", false, "cli"); err != nil {
			t.Fatal(err)
		}
	}
	if err := svc.Flush(t.Context()); err == nil {
		t.Fatal("the first flush did not fail")
	}
	if err := svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}

	lines := map[string]int{}
	for l := range strings.Lines(audit.String()) {
		var line struct{ Msg, Event, Account string }
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == auth.AuditMessage && line.Event == auth.EventUserCreated {
			lines[line.Account]++
		}
	}
	for _, a := range accounts {
		var n int
		if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM security_events WHERE kind = $1 AND account_key = $2",
			auth.EventUserCreated, a).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("%s: %d rows stored, want 1", a, n)
		}
		if n := lines[a]; n != 1 {
			t.Errorf("%s: %d audit lines, want 1", a, n)
		}
		if n := hook.rows[a]; n != 1 {
			t.Errorf("%s: the hook heard %d rows, want 1", a, n)
		}
	}
}
