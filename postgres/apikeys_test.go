package postgres_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/internal/testenv"
	"github.com/xcloak/xcloak/postgres"
)

func hashOf(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// TestAPIKeys: one key in force per name; revoking returns the key
// revoked; a revoked one stays listed and frees its name; only keys in
// force are read with their hashes.
func TestAPIKeys(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	first, err := s.AddAPIKey(ctx, "shop", "", hashOf("k1"), at)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddAPIKey(ctx, "shop", "", hashOf("k2"), at); !errors.Is(err, auth.ErrAPIKeyExists) {
		t.Fatalf("second key in force for shop: %v, want ErrAPIKeyExists", err)
	}
	if _, err := s.RevokeAPIKey(ctx, "blog", at); !errors.Is(err, auth.ErrNoAPIKey) {
		t.Fatalf("revoking an unknown name: %v, want ErrNoAPIKey", err)
	}
	revoked, err := s.RevokeAPIKey(ctx, "shop", at.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if revoked.ID != first.ID || revoked.Name != "shop" || !revoked.CreatedAt.Equal(at) || !revoked.RevokedAt.Equal(at.Add(time.Hour)) ||
		revoked.Hash != nil {
		t.Fatalf("revoked %+v; want the first key, revoked at +1h, without its hash", revoked)
	}
	if _, err := s.RevokeAPIKey(ctx, "shop", at.Add(time.Hour)); !errors.Is(err, auth.ErrNoAPIKey) {
		t.Fatalf("revoking twice: %v, want ErrNoAPIKey", err)
	}
	second, err := s.AddAPIKey(ctx, "shop", "", hashOf("k2"), at.Add(2*time.Hour))
	if err != nil {
		t.Fatalf("a new key for a revoked key's name: %v", err)
	}
	if err := s.TouchAPIKeys(ctx, []int64{second.ID}, at.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	all, err := s.APIKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ID != first.ID || !all[0].RevokedAt.Equal(at.Add(time.Hour)) || all[0].Hash != nil ||
		all[1].Revoked() || !all[1].LastUsedAt.Equal(at.Add(3*time.Hour)) {
		t.Fatalf("listed %+v; want the revoked key, then the new one used at +3h, no hashes", all)
	}
	live, err := s.ActiveAPIKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 || live[0].ID != second.ID || !bytes.Equal(live[0].Hash, hashOf("k2")) {
		t.Fatalf("in force %+v; want only the new key, with its hash", live)
	}
}

// TestAPIKeyForAnApplication: a key may speak for the application of an
// earlier key, in force or revoked, under a name of its own, and is read
// with it; an application no key was made for is refused.
func TestAPIKeyForAnApplication(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := s.AddAPIKey(ctx, "shop-2", "shop", hashOf("k0"), at); !errors.Is(err, auth.ErrNoApp) {
		t.Fatalf("a key for an application without keys: %v, want ErrNoApp", err)
	}
	if _, err := s.AddAPIKey(ctx, "shop", "", hashOf("k1"), at); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RevokeAPIKey(ctx, "shop", at); err != nil {
		t.Fatal(err)
	}
	second, err := s.AddAPIKey(ctx, "shop-2", "shop", hashOf("k2"), at)
	if err != nil || second.App != "shop" || second.Name != "shop-2" {
		t.Fatalf("a key for shop's application, shop's key revoked: %+v %v", second, err)
	}
	if third, err := s.AddAPIKey(ctx, "shop-3", "shop-2", hashOf("k3"), at); !errors.Is(err, auth.ErrNoApp) {
		t.Fatalf("a key for the application of a key's name that is not an application: %+v %v, want ErrNoApp", third, err)
	}
	live, err := s.ActiveAPIKeys(ctx)
	if err != nil || len(live) != 1 || live[0].App != "shop" || live[0].Name != "shop-2" {
		t.Fatalf("in force %+v %v; want shop-2, of shop", live, err)
	}
	all, err := s.APIKeys(ctx)
	if err != nil || len(all) != 2 || all[0].App != "shop" || all[1].App != "shop" {
		t.Fatalf("listed %+v %v; want both of shop", all, err)
	}
	// shop's name is free, but shop-2 speaks for its application: a key
	// of that name for an application of its own is refused, one that
	// says it joins it is not.
	if _, err := s.AddAPIKey(ctx, "shop", "", hashOf("k4"), at); !errors.Is(err, auth.ErrAppInUse) {
		t.Fatalf("a key named shop while shop-2 speaks for shop: %v, want ErrAppInUse", err)
	}
	if k, err := s.AddAPIKey(ctx, "shop", "shop", hashOf("k4"), at); err != nil || k.App != "shop" {
		t.Fatalf("a key named shop, joining shop: %+v %v", k, err)
	}
	if k, err := s.RevokeAPIKey(ctx, "shop-2", at); err != nil || k.App != "shop" {
		t.Fatalf("revoked %+v %v; want shop-2, of shop", k, err)
	}
}

// TestAppDevices: a device is added once, touched after, and known while
// seen within the lifetime asked.
func TestAppDevices(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := hashOf("device")
	if known, err := s.KnownAppDevice(ctx, h, at.Add(-time.Hour)); err != nil || known {
		t.Fatalf("before: %v %v, want unknown", known, err)
	}
	for i, want := range []bool{true, false} {
		seen := at.Add(time.Duration(i) * time.Hour)
		added, err := s.AddAppDevice(ctx, "shop", hashOf("olga"), hashOf("olga"), h, seen, seen, 10)
		if err != nil || added != want {
			t.Fatalf("add %d: %v %v, want added %v", i, added, err, want)
		}
	}
	if known, _ := s.KnownAppDevice(ctx, h, at.Add(30*time.Minute)); !known {
		t.Fatal("a device seen at +1h is not known after +30m")
	}
	if known, _ := s.KnownAppDevice(ctx, h, at.Add(2*time.Hour)); known {
		t.Fatal("a device last seen at +1h is known after +2h")
	}
	if n, err := s.Sweep(ctx, auth.SweepAppDevices, at.Add(2*time.Hour)); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v, want 1 removed", n, err)
	}
}

// TestAppDevicesOfAnAccount: an account keeps its max most recently used
// devices, even when they are added at once, and forgetting its devices
// forgets them all and no other account's.
func TestAppDevicesOfAnAccount(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	olga, pat := hashOf("olga"), hashOf("pat")
	const max = 3
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if _, err := s.AddAppDevice(ctx, "shop", olga, olga, hashOf(fmt.Sprint("olga-", i)), at, at, max); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n, err := s.ForgetAppDevices(ctx, olga, at.Add(-time.Minute)); err != nil || n != max {
		t.Fatalf("after 20 devices added at once: %d %v forgotten, want %d, the most an account keeps", n, err, max)
	}
	if _, err := s.AddAppDevice(ctx, "shop", pat, pat, hashOf("pat-0"), at, at, max); err != nil {
		t.Fatal(err)
	}
	// The least recently used goes first.
	for i := range max + 1 {
		seen := at.Add(time.Duration(i) * time.Hour)
		if _, err := s.AddAppDevice(ctx, "shop", olga, olga, hashOf(fmt.Sprint("olga-", i)), seen, seen, max); err != nil {
			t.Fatal(err)
		}
	}
	for i := range max + 1 {
		if known, _ := s.KnownAppDevice(ctx, hashOf(fmt.Sprint("olga-", i)), at.Add(-time.Hour)); known != (i > 0) {
			t.Fatalf("olga's device %d of %d added, an hour apart: known %v, want only the last %d", i, max+1, known, max)
		}
	}
	if n, err := s.ForgetAppDevices(ctx, olga, at.Add(4*time.Hour)); err != nil || n != max {
		t.Fatalf("forgetting olga's devices: %d %v, want %d", n, err, max)
	}
	if known, _ := s.KnownAppDevice(ctx, hashOf("olga-3"), at.Add(-time.Hour)); known {
		t.Fatal("olga's device is known after her devices were forgotten")
	}
	if known, _ := s.KnownAppDevice(ctx, hashOf("pat-0"), at.Add(-time.Hour)); !known {
		t.Fatal("forgetting olga's devices forgot pat's")
	}
}

// TestAppDevicesOfSpellings: the spellings of an account that fold alike
// keep their devices and their bound apart, and a reset of the folded
// account forgets the devices of every one of them, and those kept under
// the folded account itself before spellings were kept apart (no
// folded_hash), and no other account's; a sign-in of any spelling decided
// before it adds no device.
func TestAppDevicesOfSpellings(t *testing.T) {
	_, pool := testenv.Schema(t)
	s := postgres.New(pool)
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	folded, upper, lower, pat := hashOf("olga"), hashOf("Olga"), hashOf("olga"), hashOf("pat")
	const max = 1
	for _, d := range []struct {
		account []byte
		device  string
	}{{upper, "upper-0"}, {lower, "lower-0"}, {upper, "upper-1"}} {
		at = at.Add(time.Minute)
		if _, err := s.AddAppDevice(ctx, "shop", d.account, folded, hashOf(d.device), at, at, max); err != nil {
			t.Fatal(err)
		}
	}
	for device, want := range map[string]bool{"upper-0": false, "upper-1": true, "lower-0": true} {
		if known, _ := s.KnownAppDevice(ctx, hashOf(device), at.Add(-time.Hour)); known != want {
			t.Errorf("%s, each spelling keeping %d device: known %v, want %v", device, max, known, want)
		}
	}
	// A device kept before spellings were kept apart: under the folded
	// account, with no folded_hash.
	if _, err := pool.Exec(ctx, `INSERT INTO app_devices (hash, app, account_hash, first_seen_at, last_seen_at) VALUES ($1, 'shop', $2, $3, $3)`,
		hashOf("old"), folded, at); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddAppDevice(ctx, "shop", pat, pat, hashOf("pat-0"), at, at, max); err != nil {
		t.Fatal(err)
	}
	reset := at.Add(time.Minute)
	if n, err := s.ForgetAppDevices(ctx, folded, reset); err != nil || n != 3 {
		t.Fatalf("the folded account's reset: %d %v forgotten, want 3 (each spelling's and the old one)", n, err)
	}
	if known, _ := s.KnownAppDevice(ctx, hashOf("pat-0"), at.Add(-time.Hour)); !known {
		t.Fatal("the reset of olga forgot pat's device")
	}
	if _, err := s.AddAppDevice(ctx, "shop", upper, folded, hashOf("upper-2"), at, reset.Add(time.Minute), max); !errors.Is(err, auth.ErrResetSince) {
		t.Fatalf("a sign-in of Olga decided before the reset of olga, reported after: %v, want ErrResetSince", err)
	}
}

// TestAppDeviceAfterReset: a sign-in decided at or before its account's
// last reset adds no device, whenever its success comes; one decided
// after does. Only the account reset is concerned, and its reset is
// swept once old.
func TestAppDeviceAfterReset(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	reset := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	olga, pat := hashOf("olga"), hashOf("pat")
	if _, err := s.ForgetAppDevices(ctx, olga, reset); err != nil {
		t.Fatal(err)
	}
	// A later reset's time stands whatever order the two are noted in.
	if _, err := s.ForgetAppDevices(ctx, olga, reset.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, decided := range []time.Time{reset.Add(-time.Second), reset} {
		if _, err := s.AddAppDevice(ctx, "shop", olga, olga, hashOf("thief"), decided, reset.Add(time.Minute), 10); !errors.Is(err, auth.ErrResetSince) {
			t.Fatalf("a sign-in decided at %s, before the reset, reported after: %v, want ErrResetSince", decided, err)
		}
	}
	if known, _ := s.KnownAppDevice(ctx, hashOf("thief"), reset.Add(-time.Hour)); known {
		t.Fatal("the device of a sign-in decided before the reset is known")
	}
	if added, err := s.AddAppDevice(ctx, "shop", olga, olga, hashOf("owner"), reset.Add(time.Second), reset.Add(time.Minute), 10); err != nil || !added {
		t.Fatalf("a sign-in decided after the reset: %v %v, want added", added, err)
	}
	if added, err := s.AddAppDevice(ctx, "shop", pat, pat, hashOf("pat"), reset.Add(-time.Second), reset.Add(time.Minute), 10); err != nil || !added {
		t.Fatalf("another account's sign-in: %v %v, want added", added, err)
	}
	if n, err := s.Sweep(ctx, auth.SweepAppResets, reset.Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v, want the one reset removed", n, err)
	}
}
