package auth

import (
	"context"
)

// MalformedLogin answers a sign-in whose request could not even be read
// (a body that is not the form or JSON it should be). It is limited and
// counted like any other malformed sign-in: see malformedLogin. Errors:
// ErrInvalidRequest, *LimitedError, ErrUnavailable.
func (s *Service) MalformedLogin(ctx context.Context, c Client) error {
	_, err := s.Login(ctx, LoginRequest{Client: c})
	return err
}

// malformedLogin answers a malformed sign-in. It passes the client
// network's limit like every other sign-in, so that a flood of them is
// answered 429 once the network's quota is spent and writes no more than
// any other flood; it costs no database query and no hashing either way.
// The account's limit is not checked: a malformed request names none, so
// only the sign-in rules keyed by the client's network apply.
func (s *Service) malformedLogin(ctx context.Context, c Client) error {
	source := c.Source()
	if err := s.admitClient(ctx, FlowSignIn, c, EventLoginRejected); err != nil {
		return err
	}
	s.record(Event{Kind: EventLoginInvalid, Source: source})
	return ErrInvalidRequest
}
