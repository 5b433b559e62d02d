package auth

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
)

// Registering a passkey: BeginPasskey gives the browser the options of
// navigator.credentials.create and keeps the challenge; FinishPasskey
// checks the password typed again (as a TOTP factor's confirmation does,
// mfa_enrol.go), then the authenticator's response, and stores the
// credential confirmed. Removing one is RemoveFactor's, as for any factor.

// PasskeyCeremony is a WebAuthn ceremony begun for a browser.
type PasskeyCeremony struct {
	// Options are what the browser's navigator.credentials call takes,
	// ready to encode as JSON ({"publicKey": ...}).
	Options any
	// Binding is the value of the cookie that binds the ceremony to the
	// browser; the web layer sets it with the options.
	Binding   string
	ExpiresAt time.Time
}

// defaultPasskeyName names a passkey its owner did not name.
const defaultPasskeyName = "Passkey"

// BeginPasskey begins the registration of a passkey for the account of
// sess, from client c (counted by RulePasskeyOptionsIP, as sign-ins begun
// are): a discoverable credential, user verification preferred, none of
// the account's passkeys again. An account with MaxFactors factors begins
// none. Errors: *LimitedError, ErrTooManyFactors, ErrNoSession,
// ErrUnavailable.
func (s *Service) BeginPasskey(ctx context.Context, sess Session, c Client) (PasskeyCeremony, error) {
	ps, err := s.passkeyStore()
	if err != nil {
		return PasskeyCeremony{}, err
	}
	// Each stores a ceremony: counted first, as a sign-in's options are.
	if err := s.admitClient(ctx, FlowPasskeyBegin, c, EventMFARejected); err != nil {
		return PasskeyCeremony{}, err
	}
	if err := s.roomForFactor(ctx, s.factors, sess.UserID); err != nil {
		return PasskeyCeremony{}, err
	}
	user, err := s.passkeyUser(ctx, ps, sess.UserID, sess.Email)
	if errors.Is(err, ErrNoUser) {
		return PasskeyCeremony{}, s.accountGone()
	}
	if err != nil {
		return PasskeyCeremony{}, err
	}
	exclude := webauthn.Credentials(user.WebAuthnCredentials()).CredentialDescriptors()
	creation, data, err := s.webauthn.BeginRegistration(user, webauthn.WithExclusions(exclude))
	if err != nil {
		return PasskeyCeremony{}, fmt.Errorf("%w: beginning passkey registration: %w", ErrUnavailable, err)
	}
	ceremony, err := s.startCeremony(ctx, ps, Ceremony{Purpose: ceremonyRegister, UserID: sess.UserID}, data, creation)
	if errors.Is(err, ErrNoUser) {
		return PasskeyCeremony{}, s.accountGone()
	}
	return ceremony, err
}

// FinishPasskey registers the passkey the browser created for the
// ceremony bound to it, named name, with the password typed again. With
// the account's first factor come RecoveryCodes recovery codes, returned
// to be shown once (nil for a further factor). Errors: ErrNoSession,
// ErrInvalidRequest, *LimitedError, ErrInvalidCredentials, ErrInvalidToken
// (no live ceremony of this browser's), ErrInvalidPasskey,
// ErrPasskeyExists, ErrTooManyFactors, ErrUnavailable, ErrHasherBusy.
func (s *Service) FinishPasskey(ctx context.Context, ch FactorChange, binding, name string, response []byte) (recovery []string, err error) {
	ps, err := s.passkeyStore()
	if err != nil {
		return nil, err
	}
	name = strings.TrimSpace(name)
	if name == "" {
		name = defaultPasskeyName
	}
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > 64 || strings.ContainsFunc(name, unfitNameRune) ||
		len(response) == 0 || len(response) > MaxPasskeyResponseBytes {
		return nil, ErrInvalidRequest
	}
	user, err := s.reauthenticate(ctx, ch)
	if err != nil {
		return nil, err
	}
	c, data, err := s.takeCeremony(ctx, ps, binding, ceremonyRegister)
	if err != nil {
		return nil, err
	}
	if c.UserID != user.ID {
		return nil, ErrInvalidToken
	}
	parsed, err := protocol.ParseCredentialCreationResponseBytes(response)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPasskey, err)
	}
	pu, err := s.passkeyUser(ctx, ps, user.ID, user.Email)
	if errors.Is(err, ErrNoUser) {
		return nil, s.accountGone()
	}
	if err != nil {
		return nil, err
	}
	cred, err := s.webauthn.CreateCredential(pu, data, parsed)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPasskey, err)
	}
	// Drawn whatever the account holds now: the store writes them only
	// if the passkey is its first factor once the account's row is
	// locked (ConfirmTOTP).
	recovery, hashes := newRecoveryCodes(RecoveryCodes)
	transports := passkeyTransports(cred.Transport)
	now := s.now()
	p := Passkey{UserID: user.ID, Name: name, Handle: pu.handle, CredentialID: cred.ID, PublicKey: cred.PublicKey,
		SignCount: cred.Authenticator.SignCount, Transports: transports, AAGUID: cred.Authenticator.AAGUID,
		AttestationType: cred.AttestationType, UserVerified: cred.Flags.UserVerified,
		BackupEligible: cred.Flags.BackupEligible, BackupState: cred.Flags.BackupState, CreatedAt: now}
	// Stored whether or not its client waits: a client that hangs up as
	// it commits must not leave it done without its event and its
	// owner's notice.
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	_, codes, err := ps.AddPasskey(ctx, p, hashes, now, verifiedOf(user))
	switch {
	case errors.Is(err, ErrPasskeyExists), errors.Is(err, ErrTooManyFactors):
		return nil, err
	case errors.Is(err, ErrPasswordChanged):
		// The session ended with the new password or the sign-out.
		return nil, ErrNoSession
	case err != nil:
		return nil, s.dbDown("storing passkey", err)
	}
	if !codes {
		// Another first factor came first: its codes are the account's.
		recovery = nil
	}
	source := ch.Client.Source()
	s.record(Event{Kind: EventFactorAdded, Account: user.Email, UserID: user.ID, Source: source,
		Detail: map[string]string{"kind": string(FactorWebAuthn)}})
	s.notifyFactor(user.Email, source, &factorNotice{added: true, kind: FactorWebAuthn})
	return recovery, nil
}

// passkeyUser returns the account as the library sees it, with its
// passkeys and its user handle, drawn now if it has none. ErrNoUser if
// the account is gone, for its caller to answer as its flow does.
func (s *Service) passkeyUser(ctx context.Context, ps PasskeyStore, userID int64, email string) (passkeyUser, error) {
	keys, err := ps.Passkeys(ctx, userID)
	if err != nil {
		return passkeyUser{}, s.dbDown("reading passkeys", err)
	}
	if len(keys) > 0 {
		return passkeyUser{handle: keys[0].Handle, email: email, keys: keys}, nil
	}
	fresh := make([]byte, 32)
	rand.Read(fresh)
	handle, err := ps.WebAuthnHandle(ctx, userID, fresh)
	if errors.Is(err, ErrNoUser) {
		return passkeyUser{}, err
	}
	if err != nil {
		return passkeyUser{}, s.dbDown("reading passkey handle", err)
	}
	return passkeyUser{handle: handle, email: email}, nil
}

// startCeremony keeps the challenge data of ceremony c under a new
// binding, for passkeyCeremonyTTL, and returns the options for the
// browser with it. ErrNoUser if c is an account's and the account is
// gone, as passkeyUser.
func (s *Service) startCeremony(ctx context.Context, ps PasskeyStore, c Ceremony, data *webauthn.SessionData, options any) (PasskeyCeremony, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return PasskeyCeremony{}, fmt.Errorf("%w: encoding WebAuthn session: %w", ErrUnavailable, err)
	}
	binding, bindingHash := newToken()
	now := s.now()
	c.BindingHash, c.Session, c.ExpiresAt = bindingHash, raw, now.Add(passkeyCeremonyTTL)
	err = ps.AddCeremony(ctx, c)
	if errors.Is(err, ErrNoUser) {
		return PasskeyCeremony{}, err
	}
	if err != nil {
		return PasskeyCeremony{}, s.dbDown("storing WebAuthn ceremony", err)
	}
	return PasskeyCeremony{Options: options, Binding: binding, ExpiresAt: c.ExpiresAt}, nil
}

// takeCeremony spends the live ceremony of purpose bound to binding and
// returns it with its challenge data; ErrInvalidToken if there is none.
func (s *Service) takeCeremony(ctx context.Context, ps PasskeyStore, binding, purpose string) (Ceremony, webauthn.SessionData, error) {
	var data webauthn.SessionData
	if !wellFormedToken(binding) {
		return Ceremony{}, data, ErrInvalidToken
	}
	c, err := ps.TakeCeremony(ctx, hashToken(binding), purpose, s.now())
	if errors.Is(err, ErrInvalidToken) {
		return Ceremony{}, data, err
	}
	if err != nil {
		return Ceremony{}, data, s.dbDown("reading WebAuthn ceremony", err)
	}
	if err := json.Unmarshal(c.Session, &data); err != nil {
		return Ceremony{}, data, fmt.Errorf("%w: decoding WebAuthn session: %w", ErrUnavailable, err)
	}
	return c, data, nil
}

// Bounds of the transports a passkey is stored with.
const (
	maxPasskeyTransports     = 8
	maxPasskeyTransportBytes = 32
)

// passkeyTransports are the transports a registration's response listed
// that can be a browser's (short words of printable ASCII, each once, a
// few): the response is the client's, which the library passes on as
// written, and a NUL byte or a list without end is no passkey's.
func passkeyTransports(listed []protocol.AuthenticatorTransport) []string {
	out := make([]string, 0, min(len(listed), maxPasskeyTransports))
	for _, t := range listed {
		if len(out) == maxPasskeyTransports {
			break
		}
		if t == "" || len(t) > maxPasskeyTransportBytes || slices.Contains(out, string(t)) ||
			strings.ContainsFunc(string(t), func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
			continue
		}
		out = append(out, string(t))
	}
	return out
}

// factorKindText names a kind of factor in mails.
func factorKindText(k FactorKind) string {
	if k == FactorWebAuthn {
		return "a passkey"
	}
	return "an authenticator app"
}

// unfitNameRune reports whether a passkey's name may not hold r: a control
// character (a line break), or one drawn as nothing. Administrators read
// the name in the account's list of factors, where a direction override
// would turn the rest of the line around and an invisible character make
// two names look alike.
func unfitNameRune(r rune) bool { return unicode.IsControl(r) || invisible(r) }
