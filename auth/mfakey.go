package auth

import (
	"context"
	"errors"
)

// The MFA key at start. A sealed TOTP secret opens with the key it was
// sealed with alone (sealSecret), so a service started without it (the
// setting left out, its file missing) or with another one would refuse
// every code of those factors' owners, while it answered as healthy:
// CheckMFAKey lets a server refuse to start instead.

// Errors of CheckMFAKey. Neither says anything of the key or the secret.
var (
	// ErrMFAKeyMissing: the database holds sealed TOTP secrets, and no
	// key is set.
	ErrMFAKeyMissing = errors.New("auth: the database holds TOTP secrets sealed with an MFA key, and none is set")
	// ErrMFAKeyWrong: the key set is not the one they were sealed with.
	ErrMFAKeyWrong = errors.New("auth: the MFA key set is not the one the database's TOTP secrets were sealed with")
)

// CheckMFAKey opens the newest confirmed TOTP factor that is sealed with
// the configured key: ErrMFAKeyMissing without a key, ErrMFAKeyWrong if
// the key does not open it, nil if it does or no factor is sealed (a
// database of plain secrets takes any key, or none). The newest, as it
// was sealed with the key last in force: a key replaced before this
// check existed left older factors that no key opens now, which their
// owners pass with a recovery code, and which a check of the oldest
// would keep every replica from starting for. Without a store of
// factors there is nothing to check.
func (s *Service) CheckMFAKey(ctx context.Context) error {
	if s.factors == nil {
		return nil
	}
	f, err := s.factors.NewestTOTPFactor(ctx, secretSealed)
	switch {
	case errors.Is(err, ErrNoFactor):
		return nil
	case err != nil:
		return err
	case s.cfg.MFA.Key == nil:
		return ErrMFAKeyMissing
	}
	if _, err := openSecret(s.cfg.MFA.Key, f.UserID, f.Secret); err != nil {
		return ErrMFAKeyWrong
	}
	return nil
}
