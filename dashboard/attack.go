package dashboard

import (
	"context"
	"time"
)

// AttackPeriod is how far back the attack panel's figures reach.
const AttackPeriod = 5 * time.Minute

// Attack is attack mode and the attack panel's figures.
type Attack struct {
	// Active reports that attack mode is on; Since, Trigger and By say
	// since when, what switched it on ("automatic" or "admin") and which
	// administrator did ("" for the detector). They are zero while it is
	// off.
	Active  bool
	Since   time.Time
	Trigger string
	By      string
	// The figures of the last AttackPeriod, whether attack mode is on or
	// not: attempts by outcome, distinct accounts and client networks
	// tried (estimates, within about 1%), and the networks (IPv4 /24, IPv6
	// /48) with the most attempts that did not succeed.
	Attempts         int64
	Failures         int64 // wrong passwords for existing accounts
	UnknownAccounts  int64
	Rejected         int64
	Held             int64 // right passwords held for new-device verification
	DistinctAccounts int64
	DistinctNetworks int64
	TopNetworks      []Ranked
}

// AttackWatch is attack mode as the dashboard reads and switches it
// (package attack).
type AttackWatch interface {
	// AttackStatus returns attack mode and the panel's figures as of now.
	AttackStatus(ctx context.Context, now time.Time) (Attack, error)
	// SwitchAttack turns attack mode on or off in an administrator's
	// name; it reports whether that changed anything.
	SwitchAttack(ctx context.Context, on bool, by string) (changed bool, err error)
	// Active reports whether attack mode is on as this replica knows it,
	// without asking Redis: what the dashboard says while Redis cannot be
	// read.
	Active() bool
}
