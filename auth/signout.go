package auth

import (
	"context"
	"errors"
)

// EventSignedOutEverywhere: every session of an account was ended and its
// known devices forgotten; Detail "by" says who did it.
const EventSignedOutEverywhere = "signed_out_everywhere"

// SignOutEverywhere ends every session of an account and forgets its known
// devices, at once: what an administrator does for an account that may be
// in someone else's hands. Every browser then signs in as a stranger
// would, held by the account's limit and lockout. by names who did it, as
// for Unlock ("admin:ann@example.com", "cli"). ErrNoUser if there is no
// such account.
func (s *Service) SignOutEverywhere(ctx context.Context, email, by string) error {
	email, err := NormaliseEmail(email)
	if err != nil {
		return err
	}
	ctx, cancel := s.afterDecision(ctx) // finished and recorded whether or not its caller waits
	defer cancel()
	userID, err := s.store.SignOutEverywhere(ctx, email)
	s.sessionCache.purge()
	if errors.Is(err, ErrNoUser) {
		return err
	}
	if err != nil {
		return s.dbDown("signing out everywhere", err)
	}
	s.deviceCache.purge()
	s.record(Event{Kind: EventSignedOutEverywhere, Account: email, UserID: userID, Detail: map[string]string{"by": by}})
	return nil
}
