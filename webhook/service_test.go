package webhook_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/xcloaktest"
	"github.com/xcloak/xcloak/webhook"
)

// TestHangingReceiverNeverHoldsUpSignIns: the service's sender POSTs to a
// receiver that never answers. Every sign-in is still decided (a lockout
// each), the queues fill, and every delivery (each account's user.created,
// then its lockout.started, each in its queue) is accounted for: under
// way at the receiver, queued, or dropped and counted.
func TestHangingReceiverNeverHoldsUpSignIns(t *testing.T) {
	r := hanging(t)
	s := newSender(t, webhook.Config{Queue: 3, Workers: 1, Flush: time.Millisecond}, r.url())
	env := xcloaktest.New(t, xcloaktest.Options{Hook: s.Sender, Auth: func(c *auth.Config) { c.Lockout.Threshold = 2 }})
	const accounts = 12
	for i := range accounts {
		email := fmt.Sprintf("user%d@example.com", i)
		env.AddUser(t, email, "correct horse battery staple", false)
		client := auth.Client{Addr: netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)})}
		for _, wrong := range []string{email + " one", email + " two", email + " three"} {
			_, err := env.Service.Login(t.Context(), auth.LoginRequest{Email: email, Password: wrong, Client: client})
			if err == nil {
				t.Fatal("a wrong password signed in")
			}
		}
		// Locked: refused at once, whatever the receiver does.
		_, err := env.Service.Login(t.Context(), auth.LoginRequest{Email: email, Password: "correct horse battery staple", Client: client})
		if !errors.Is(err, auth.ErrLimited) {
			t.Fatalf("%s after its lockout: %v, want limited", email, err)
		}
		env.Flush(t) // the lockout's row is written, its delivery queued
		if i == 1 {
			// The worker and the urgent queue's own are stuck with the
			// first two: the first account's user.created and lockout,
			// or, where the worker took that user.created, it and the
			// second's. Neither queue has filled yet.
			r.wait(2)
		}
	}
	dropped := s.metric(t, "xcloak_webhook_dropped_total", webhook.DropQueueFull)
	queued := s.metric(t, "xcloak_webhook_queued", "")
	const deliveries = 2 * accounts
	if queued != 6 || dropped != deliveries-8 {
		t.Errorf("queued %v, dropped %v; want 6 queued (3 in each queue), 2 under way, %d dropped", queued, dropped, deliveries-8)
	}
}

// TestAttackModeIsSent: attack mode's start and end, which the attack
// watch writes apart from the service's events, are sent too, once each,
// with who switched them; and so is an administrator's switch that
// neither started nor ended it (off while off).
func TestAttackModeIsSent(t *testing.T) {
	r := newReceiver(t, nil)
	s := newSender(t, webhook.Config{}, r.url())
	env := xcloaktest.New(t, xcloaktest.Options{Hook: s.Sender})
	for _, on := range []bool{false, true, false} {
		if _, err := env.Attack.SwitchAttack(t.Context(), on, "admin:boss@example.com"); err != nil {
			t.Fatal(err)
		}
	}
	r.wait(3)
	byType := r.byType()
	started, ended := byType[webhook.TypeAttackStarted], byType[webhook.TypeAttackEnded]
	switched := byType[webhook.TypeAttackSwitched]
	if len(byType) != 3 || started.Data["by"] != "admin:boss@example.com" || started.Data["trigger"] != "admin" ||
		ended.Data["since"] == "" || switched.Data["by"] != "admin:boss@example.com" || switched.Data["mode"] != "off" {
		t.Errorf("webhooks %+v, want attack.switched (off), attack.started and attack.ended by boss", byType)
	}
}

// TestAccountAdministrationIsSent: the creation of an account and each
// administrator's act on it, done through the service, reach the receiver
// once each, naming the account and who did it: a minted administrator
// (user.created with role admin, or user.promoted) and a password set
// behind its owner's back leave a trace off the machine.
func TestAccountAdministrationIsSent(t *testing.T) {
	r := newReceiver(t, nil)
	s := newSender(t, webhook.Config{}, r.url())
	env := xcloaktest.New(t, xcloaktest.Options{Hook: s.Sender})
	const by = "admin:boss@example.com"
	env.AddUser(t, "boss@example.com", "correct horse battery staple", true) // so that ann's demotion leaves one
	ann, err := env.Service.CreateUser(t.Context(), "ann@example.com", "correct horse battery staple", false, by)
	if err != nil {
		t.Fatal(err)
	}
	for _, act := range []func() error{
		func() error { _, err := env.Service.DisableUser(t.Context(), ann.ID, by); return err },
		func() error { _, err := env.Service.EnableUser(t.Context(), ann.ID, by); return err },
		func() error { _, err := env.Service.PromoteUser(t.Context(), ann.ID, by); return err },
		func() error { _, err := env.Service.DemoteUser(t.Context(), ann.ID, by); return err },
		func() error {
			return env.Service.SetPassword(t.Context(), ann.Email, "another correct horse battery", by)
		},
		func() error { _, err := env.Service.DeleteUser(t.Context(), ann.ID, by); return err },
	} {
		if err := act(); err != nil {
			t.Fatal(err)
		}
	}
	env.Flush(t)
	want := []string{webhook.TypeUserCreated, webhook.TypeUserDisabled, webhook.TypeUserEnabled, webhook.TypeUserPromoted,
		webhook.TypeUserDemoted, webhook.TypePasswordSet, webhook.TypeUserDeleted}
	r.wait(1 + len(want)) // boss's user.created, then ann's
	byType := map[string]webhook.Event{}
	for _, g := range r.requests() {
		if e := g.event; e.Data["account"] == ann.Email {
			if _, dup := byType[e.Type]; dup {
				t.Errorf("%s sent twice", e.Type)
			}
			byType[e.Type] = e
		}
	}
	for _, typ := range want {
		e, ok := byType[typ]
		if !ok || e.Data["account"] != ann.Email || e.Data["by"] != by || e.Data["user_id"] != fmt.Sprint(ann.ID) {
			t.Errorf("%s: %+v, want it naming %s by %s", typ, e, ann.Email, by)
		}
	}
	if e := byType[webhook.TypeUserCreated]; e.Data["role"] != "member" {
		t.Errorf("user.created: %+v, want role member", e)
	}
	if len(byType) != len(want) {
		t.Errorf("webhooks of ann %v, want %v only", byType, want)
	}
}

// TestAPIKeysAreSent: an API key made and revoked through the service
// reach the receiver once each, naming the application, the key's id and
// who did it, never the key; a refused add or revoke sends nothing.
func TestAPIKeysAreSent(t *testing.T) {
	r := newReceiver(t, nil)
	s := newSender(t, webhook.Config{}, r.url())
	env := xcloaktest.New(t, xcloaktest.Options{Hook: s.Sender})
	key, info, err := env.Service.AddAPIKey(t.Context(), "shop", "cli")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.Service.AddAPIKey(t.Context(), "shop", "cli"); !errors.Is(err, auth.ErrAPIKeyExists) {
		t.Fatalf("second key for shop: %v", err)
	}
	if err := env.Service.RevokeAPIKey(t.Context(), "shop", "cli"); err != nil {
		t.Fatal(err)
	}
	if err := env.Service.RevokeAPIKey(t.Context(), "shop", "cli"); !errors.Is(err, auth.ErrNoAPIKey) {
		t.Fatalf("second revoke of shop: %v", err)
	}
	env.Flush(t)
	r.wait(2)
	byType := r.byType()
	for _, g := range r.requests() {
		if strings.Contains(string(g.body), key[4:12]) {
			t.Errorf("%s carries part of the key: %s", g.event.Type, g.body)
		}
	}
	for _, typ := range []string{webhook.TypeAPIKeyCreated, webhook.TypeAPIKeyRevoked} {
		e, ok := byType[typ]
		want := map[string]string{"app": "shop", "key_id": fmt.Sprint(info.ID), "by": "cli"}
		if !ok || fmt.Sprint(e.Data) != fmt.Sprint(want) {
			t.Errorf("%s: %+v, want data %v", typ, e, want)
		}
	}
	if len(byType) != 2 {
		t.Errorf("webhooks %v, want apikey.created and apikey.revoked only", byType)
	}
}
