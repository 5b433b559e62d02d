package auth

import (
	"context"
	"errors"
	"time"
)

// errNoActivityLog: the service was made without Deps.Activity.
var errNoActivityLog = errors.New("no activity log")

// The kinds of event an account's owner sees in its activity list: what
// happened to the account, never the deployment's own (attack mode, spraying)
// or other accounts'. A sign-in from a new device is one entry, its
// EventLoginSucceeded with NewDevice set, not two. Requests for reset
// and unlock links are left out: they are recorded without an account id,
// so that a request tells nothing of whether the account exists.
var activityKinds = []string{
	EventLoginSucceeded, EventLoginFailed,
	EventLockout, EventUnlock, EventUnlockConfirmed,
	EventResetCompleted, EventPasswordChanged, EventPasswordSet,
	EventSessionEnded, EventDeviceForgotten, EventSignedOutEverywhere,
	EventVerificationRequired, EventVerificationConfirmed, EventNewDeviceSignedOut,
	EventFactorAdded, EventFactorRemoved, EventRecoveryCodesRegenerated, EventRecoveryCodeUsed, EventMFAFailed, EventMFALockout,
}

// ActivityKinds returns the kinds of event an activity list holds.
func ActivityKinds() []string { return append([]string(nil), activityKinds...) }

// MaxActivityPage bounds the entries of one page of an activity list.
const MaxActivityPage = 50

// Activity is one entry of an account's activity list.
type Activity struct {
	// ID orders entries that share At; with At it makes the cursor of the
	// next page.
	ID int64
	// At is when it happened; for grouped failures, the last of them.
	At time.Time
	// Kind is one of ActivityKinds.
	Kind string
	// Network is the client's network (Client.Source), "" if none.
	Network string
	// Count is how many events the entry stands for: the failed sign-ins
	// (EventLoginFailed) from one network within one hour (UTC) are one
	// entry; every other entry is 1.
	Count int
	// NewDevice marks a sign-in (EventLoginSucceeded) from a browser that
	// was not a known device: its event's Detail has device=new.
	NewDevice bool
	// Browser describes the browser of a sign-in (DescribeBrowser), ""
	// for other entries and for sign-ins recorded before it was kept.
	Browser string
}

// ActivityCursor is where a page of an activity list starts: after the
// entry with At and ID. The zero cursor is the first page.
type ActivityCursor struct {
	At time.Time
	ID int64
}

// ActivityLog lists an account's own security events (package postgres
// keeps them in Postgres).
type ActivityLog interface {
	// AccountActivity lists the events of kinds whose account is userID
	// and that happened at or after the account was created, newest
	// first, starting after before (the zero cursor: from the newest), at
	// most limit. The failed sign-ins of one network in one hour are one
	// entry (see Activity.Count).
	AccountActivity(ctx context.Context, userID int64, kinds []string, before ActivityCursor, limit int) ([]Activity, error)
}

// Activity lists a page of the security events of sess's account, newest
// first, after before, at most limit entries (1 to MaxActivityPage). Only
// events recorded under the account's id since it was created are listed:
// nothing of other accounts, nor attempts on its address from before it
// existed. Each request counts against RuleAccountIP.
//
// Errors: ErrInvalidRequest (limit out of range), *LimitedError,
// ErrUnavailable.
func (s *Service) Activity(ctx context.Context, sess Session, c Client, before ActivityCursor, limit int) ([]Activity, error) {
	if limit < 1 || limit > MaxActivityPage {
		return nil, ErrInvalidRequest
	}
	if err := s.checkAccountLimit(ctx, sess, c); err != nil {
		return nil, err
	}
	if s.activity == nil {
		return nil, unavailable("listing activity", errNoActivityLog)
	}
	list, err := s.activity.AccountActivity(ctx, sess.UserID, activityKinds, before, limit)
	if err != nil {
		return nil, s.dbDown("listing activity", err)
	}
	return list, nil
}
