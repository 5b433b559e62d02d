package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/xcloak/xcloak/auth"
)

// Bounds of the event search.
const (
	// SearchPage is the length of a page of the search.
	SearchPage = 50
	// MaxSearchExport bounds the rows of one export, which is read a
	// page at a time and streamed, so costs little memory and holds a
	// Postgres connection only while a page is read.
	MaxSearchExport = 100_000
)

// SearchKinds are the event kinds the search knows: every kind the
// service writes.
var SearchKinds = []string{
	auth.EventLoginSucceeded, auth.EventLoginFailed, auth.EventLoginRejected, auth.EventLoginInvalid,
	auth.EventLoginUnavailable, auth.EventNewDevice, auth.EventLockout, auth.EventLockoutEnded, auth.EventUnlock,
	auth.EventResetRequested, auth.EventResetRejected, auth.EventResetCompleted, auth.EventResetFailed,
	auth.EventResetMailDropped, auth.EventPasswordSprayed, auth.EventPasswordChanged,
	auth.EventSessionEnded, auth.EventDeviceForgotten, auth.EventSignedOutEverywhere,
	auth.EventUnlockRequested, auth.EventUnlockRejected, auth.EventUnlockConfirmed,
	auth.EventVerificationRequired, auth.EventVerificationConfirmed, auth.EventVerificationRejected,
	auth.EventNewDeviceSignedOut, auth.EventAttemptAllowed,
	auth.EventAttackStarted, auth.EventAttackEnded, auth.EventAttackSwitched,
	auth.EventMFARequired, auth.EventMFAFailed, auth.EventMFARejected, auth.EventMFALockout, auth.EventPasskeyCloned,
	auth.EventFactorAdded, auth.EventFactorRemoved, auth.EventRecoveryCodesRegenerated, auth.EventRecoveryCodeUsed,
	auth.EventUserCreated, auth.EventUserDisabled, auth.EventUserEnabled, auth.EventUserDeleted, auth.EventUserPromoted,
	auth.EventUserDemoted, auth.EventPasswordSet, auth.EventAPIKeyCreated, auth.EventAPIKeyRevoked,
	auth.EventEventsExported,
}

// EventCursor is where a page of the search ends: the time and ID of its
// last event. The zero cursor starts with the newest.
type EventCursor struct {
	At time.Time
	ID int64
}

// EventSearch selects security events; its filters combine. Build one
// with ParseEventSearch, which normalises them as the events are stored.
type EventSearch struct {
	// Account is the stored account: a folded email, or an application's
	// "app NAME ACCOUNT"; "" for any.
	Account string
	// Network is the network searched, as events store networks: an
	// address, or a prefix with its host bits cleared; "" for any. It
	// selects every event whose network overlaps it: the addresses and
	// networks inside it, and the wider ones that hold it (an IPv6
	// client's /64, the /24 or /48 of a summary of folded events), whose
	// events may be of it.
	Network string
	// Kind is one of SearchKinds, "" for any.
	Kind string
	// Before continues after the last event of a previous page.
	Before EventCursor
	// Limit is how many events to read, 1 to MaxSearchExport.
	Limit int
}

// ParseEventSearch builds the search for what an administrator typed:
// account is folded as auth.NormaliseEmail when it is an email, as
// auth.ParseAppAccount when it is an application's ("app NAME ACCOUNT"),
// and taken as it is otherwise; network is an address
// or a CIDR prefix (an IPv6 address is searched as its /64, the network
// its events record), which finds the events of every network that
// overlaps it (see EventSearch.Network); kind must be a known kind. Bad
// input is an *auth.FieldError.
func ParseEventSearch(account, network, kind string) (EventSearch, error) {
	var q EventSearch
	if account = strings.TrimSpace(account); account != "" {
		if len(account) > 512 {
			return q, &auth.FieldError{Field: "account", Message: "is too long"}
		}
		// No stored account holds them, and Postgres refuses text that
		// is not UTF-8 or holds NUL, which would read as its failure.
		if !utf8.ValidString(account) || strings.ContainsFunc(account, unicode.IsControl) {
			return q, &auth.FieldError{Field: "account", Message: "must be UTF-8 without control characters"}
		}
		if id, ok := auth.ParseAppAccount(account); ok {
			// As its events store it: folded, so that the account as
			// its user typed it finds them (auth.FoldAccount).
			account = id
		} else if !strings.HasPrefix(account, "app ") {
			if e, err := auth.NormaliseEmail(account); err == nil {
				account = e
			}
		}
		q.Account = account
	}
	if network = strings.TrimSpace(network); network != "" {
		n, err := parseNetwork(network)
		if err != nil {
			return q, errNetwork
		}
		q.Network = n
	}
	if kind = strings.TrimSpace(kind); kind != "" {
		if !slices.Contains(SearchKinds, kind) {
			return q, &auth.FieldError{Field: "kind", Message: "is not a known event kind"}
		}
		q.Kind = kind
	}
	return q, nil
}

// errNetwork answers a network that is neither an address nor a prefix.
var errNetwork = &auth.FieldError{Field: "network", Message: "must be an IP address or a CIDR prefix such as 2001:db8::/64"}

// parseNetwork turns an address or a prefix into the network searched, in
// the form security events store networks: an IPv4 address as itself, an
// IPv6 address as its /64, a prefix with its host bits cleared (a /32 or
// /128 as its address, an IPv4-mapped IPv6 prefix as its IPv4 one, since
// events record unmapped addresses). An IPv6 address that stands for an
// IPv4 one (auth.CountedAddr) is that IPv4 address, as events name it.
func parseNetwork(s string) (string, error) {
	if len(s) > 64 {
		return "", fmt.Errorf("dashboard: network too long")
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return "", err
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		p = p.Masked()
		if p.IsSingleIP() {
			return p.Addr().Unmap().String(), nil
		}
		return p.String(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return "", err
	}
	a = auth.CountedAddr(a)
	if a.Is4() {
		return a.String(), nil
	}
	return netip.PrefixFrom(a, 64).Masked().String(), nil
}

// SearchEvents calls fn with each event q selects, newest first (by time,
// then ID), at most q.Limit of them; it stops at fn's first error.
func (r *Reader) SearchEvents(ctx context.Context, q EventSearch, fn func(StoredEvent) error) error {
	if q.Limit < 1 || q.Limit > MaxSearchExport || q.Before.ID < 0 {
		return fmt.Errorf("%w: search of %d events", auth.ErrInvalidRequest, q.Limit)
	}
	if q.Kind != "" && !slices.Contains(SearchKinds, q.Kind) {
		return &auth.FieldError{Field: "kind", Message: "is not a known event kind"}
	}
	if q.Network != "" {
		// Written as parseNetwork writes it, which the store compares as
		// an inet: text Postgres would not read as one fails the query.
		n, err := parseNetwork(q.Network)
		if err != nil {
			return errNetwork
		}
		q.Network = n
	}
	bounded, cancel := context.WithTimeout(ctx, r.searchTimeout)
	defer cancel()
	err := r.store.SearchEvents(bounded, q, fn)
	if err != nil && q.Network != "" && ctx.Err() == nil && errors.Is(bounded.Err(), context.DeadlineExceeded) {
		return errNetworkTooWide
	}
	return err
}

// searchTimeout bounds one page of a search. The store reads a network's
// events through its index and sorts them (postgres.Store.searchNetwork),
// which for a network as wide as 0.0.0.0/0 is most of the log: without a
// bound one search would keep Postgres busy for as long as that takes.
const searchTimeout = 10 * time.Second

var errNetworkTooWide = &auth.FieldError{Field: "network",
	Message: "holds too many events to search within 10 seconds: give a narrower one, or an account or a kind besides"}

// defaultSearches is how many searches run at once on a Reader not told
// its pool's size (ShareConnections): half of the smallest pool pgxpool
// makes by default, max(4, CPUs).
const defaultSearches = 2

// ShareConnections bounds the searches and export pages that read at once on
// this Reader, whatever their sessions, to half of conns, the connections
// of the Postgres pool it shares with the sign-ins (at least one). Each
// page of a search may hold a connection for searchTimeout: a handful of
// administrators' sessions, or a stolen cookie signed in a few times,
// would otherwise take the whole pool, and every sign-in would wait for
// it. Call it before the Reader is used.
func (r *Reader) ShareConnections(conns int) {
	r.searches = make(chan struct{}, max(1, conns/2))
}

// MaxSearches is how many searches and exports run at once at most.
func (r *Reader) MaxSearches() int { return cap(r.searches) }

// StartSearch takes a place for one search or export, which done gives
// back; ok is false, and done nil, when every place is taken. It does not
// wait: a search refused at once (429) leaves its administrator to retry,
// where one that waited would hold its request, and its connection to
// the browser, for as long as the others run.
func (r *Reader) StartSearch() (done func(), ok bool) {
	select {
	case r.searches <- struct{}{}:
		return func() { <-r.searches }, true
	default:
		return nil, false
	}
}

// WaitSearch is StartSearch for a read that cannot be refused any more
// (an export's later pages, once its answer has begun): it waits for a
// place until ctx ends, and then returns ctx's error.
func (r *Reader) WaitSearch(ctx context.Context) (done func(), err error) {
	select {
	case r.searches <- struct{}{}:
		return func() { <-r.searches }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
