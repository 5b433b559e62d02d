package authtest

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
)

// Service is an auth.Service on in-memory stores, in-process limits and a
// recording mailer, with no database, Redis or mail server behind it, for
// tests of the flows' logic and of the web layer's translation. The
// service XCloak runs is assembled by internal/app, on the real stores.
type Service struct {
	*auth.Service
	Store   *Store
	Limiter Limiter
	Events  *EventStore
	Counter *EventCounter
	Mail    *Mailer
	Config  auth.Config
}

// FastParams make hashing quick in tests; the default parameters have
// their own tests.
var FastParams = auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

// NewService builds a Service with the default configuration, a test
// secret and public URL, changed by configure if set, and the in-memory
// dependencies, changed by each of deps (to put a hook in a store, say).
// Its background work runs until the test ends. The fields hold the
// defaults, whatever deps replaced.
func NewService(t testing.TB, configure func(*auth.Config), deps ...func(*auth.Deps)) *Service {
	t.Helper()
	cfg := auth.DefaultConfig()
	cfg.Secret = []byte("0123456789abcdef0123456789abcdef")
	cfg.PublicURL, _ = url.Parse("https://login.example.test/")
	if configure != nil {
		configure(&cfg)
	}
	limiter, err := NewLimiter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hasher, err := auth.NewHasher(FastParams, 4, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{Store: NewStore(), Limiter: limiter, Events: &EventStore{}, Counter: &EventCounter{}, Mail: &Mailer{}, Config: cfg}
	d := auth.Deps{Store: s.Store, Limiter: limiter, Hasher: hasher, Mailer: s.Mail, Events: s.Events, Counter: s.Counter}
	for _, set := range deps {
		set(&d)
	}
	if s.Service, err = auth.NewService(cfg, d); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Service.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}
