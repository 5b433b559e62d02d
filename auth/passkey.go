package auth

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"
)

// Passkeys (WebAuthn). A passkey is a second factor of kind FactorWebAuthn,
// registered from the account page with the password typed again, like a
// TOTP factor (passkey_enrol.go). It then serves twice (passkey_signin.go):
// as the second step after the right password, and, being a discoverable
// credential, as a sign-in of its own with no password at all.
//
// Every ceremony's challenge is kept server-side (PasskeyStore.AddCeremony),
// under the SHA-256 of a cookie that binds it to the browser that asked for
// it, for passkeyCeremonyTTL; the response that answers it deletes it first,
// so a challenge is answered once. The relying party is XCloak's public
// URL: its host is the RP ID and its origin the one origin accepted, unless
// WebAuthnConfig says otherwise (passkey_config.go).

// WebAuthnConfig names the WebAuthn relying party. The zero value takes
// both from Config.PublicURL.
type WebAuthnConfig struct {
	// RPID is the relying party's ID, a registrable domain suffix of the
	// origins' hosts (XCLOAK_WEBAUTHN_RP_ID); "" means PublicURL's host.
	RPID string
	// Origins are the origins a ceremony may come from, PublicURL's among
	// them (XCLOAK_WEBAUTHN_ORIGINS); none means PublicURL's alone.
	Origins []string
}

// Passkey is a WebAuthn credential of an account, as stored.
type Passkey struct {
	// ID is its second factor's id.
	ID, UserID int64
	Name       string
	// Handle is the account's WebAuthn user handle, Email its address.
	Handle []byte
	Email  string
	// CredentialID and PublicKey (COSE) are the credential's.
	CredentialID, PublicKey []byte
	// SignCount is the authenticator's counter as last seen.
	SignCount       uint32
	Transports      []string
	AAGUID          []byte
	AttestationType string
	// UserVerified, BackupEligible and BackupState are the flags the
	// authenticator gave at registration (BackupState: as last seen).
	UserVerified, BackupEligible, BackupState bool
	// SignsInAlone: it signs in without the password, as it does from
	// its registration until the password is replaced, and again once
	// used as the second step after the new one.
	SignsInAlone          bool
	CreatedAt, LastUsedAt time.Time
}

// Ceremony purposes (webauthn_ceremonies.purpose).
const (
	ceremonyRegister   = "register"
	ceremonySecondStep = "second_step"
	ceremonyPasskey    = "passkey"
)

// Ceremony is a WebAuthn ceremony under way, as stored.
type Ceremony struct {
	// BindingHash is the SHA-256 of the cookie that binds it to a browser.
	BindingHash []byte
	Purpose     string
	// UserID is the account's, 0 for a passwordless sign-in.
	UserID int64
	// MFATokenHash is the second step's token hash, for ceremonySecondStep.
	MFATokenHash []byte
	// Session is the library's webauthn.SessionData, as JSON.
	Session   []byte
	ExpiresAt time.Time
}

// PasskeyStore keeps passkeys and WebAuthn ceremonies. Package postgres
// implements it.
type PasskeyStore interface {
	// WebAuthnHandle returns the account's user handle, setting it to
	// fresh if it has none yet; ErrNoUser if the account is gone.
	WebAuthnHandle(ctx context.Context, userID int64, fresh []byte) ([]byte, error)
	// Passkeys lists the account's passkeys, oldest first.
	Passkeys(ctx context.Context, userID int64) ([]Passkey, error)
	// PasskeyByCredential returns the passkey with credential id id, with
	// its account's handle; ErrNoFactor if there is none.
	PasskeyByCredential(ctx context.Context, id []byte) (Passkey, error)
	// AddPasskey stores p confirmed and returns its id, at once with its
	// recovery codes as ConfirmFactor does: codes says whether recovery
	// became the account's; ErrPasskeyExists if its credential id is
	// stored already.
	// It is stored only while v is still the account's
	// (ErrPasswordChanged otherwise), as ConfirmFactor confirms: a
	// passkey registered with a password replaced meanwhile would sign
	// in alone after the new password, which stops every other one.
	AddPasskey(ctx context.Context, p Passkey, recovery [][]byte, at time.Time, v Verified) (id int64, codes bool, err error)
	// UsePasskey records count as the passkey's counter if it moves on
	// from the stored one (or both are 0), with backup as its backup
	// state, and reports whether it did: a counter that goes back is
	// refused, however many assertions race. password is, for a second
	// step, the password hash its first step verified: if that is still
	// the account's, the passkey signs in alone again. "" for a passkey
	// that signed in alone.
	UsePasskey(ctx context.Context, id int64, count uint32, backup bool, password string, at time.Time) (bool, error)
	// AddCeremony stores c; ErrNoUser if c.UserID is set and that account
	// is gone. Expired ceremonies are never taken, and the janitor removes
	// them (SweepCeremonies).
	AddCeremony(ctx context.Context, c Ceremony) error
	// TakeCeremony deletes the live ceremony of purpose stored under
	// bindingHash and returns it; ErrInvalidToken if there is none.
	TakeCeremony(ctx context.Context, bindingHash []byte, purpose string, now time.Time) (Ceremony, error)
}

// Errors of passkeys.
var (
	// ErrPasskeyExists: the credential is registered already.
	ErrPasskeyExists = errors.New("auth: passkey registered already")
	// ErrInvalidPasskey: a WebAuthn response that is malformed, does not
	// answer its challenge, names no stored credential, or does not
	// verify.
	ErrInvalidPasskey = errors.New("auth: invalid passkey response")
	// ErrPasskeyNeedsPassword: a passkey that verified but no longer
	// signs in alone, the account's password having been replaced since
	// it last served after the password (Passkey.SignsInAlone).
	ErrPasskeyNeedsPassword = errors.New("auth: after a new password, this passkey signs in only after the password, once")
	// ErrPasskeysOff: this server runs without passkeys (its public URL
	// is one where browsers offer no WebAuthn), by configuration, not by
	// failure.
	ErrPasskeysOff = errors.New("auth: passkeys are off on this server")
)

// Passkey events.
const (
	// EventPasskeyCloned: an assertion whose signature counter went back,
	// refused: the authenticator may have been copied. Detail "factor".
	EventPasskeyCloned = "passkey_counter_regressed"
)

// passkeyCeremonyTTL is how long a ceremony's challenge may be answered.
const passkeyCeremonyTTL = 5 * time.Minute

// MaxPasskeyResponseBytes bounds a WebAuthn response before it is parsed;
// real ones are well under 4 KiB.
const MaxPasskeyResponseBytes = 16 << 10

// errPasskeysOff: the public URL is where browsers offer no WebAuthn (an
// IP address, or http away from localhost), and no relying party was set;
// the service runs without passkeys.
var errPasskeysOff = errors.New("auth: passkeys need https and a domain name (or localhost), and the public URL has neither")

// newWebAuthn builds the relying party from the public URL and cfg
// (WebAuthnConfig.Resolve).
func newWebAuthn(public *url.URL, cfg WebAuthnConfig) (*webauthn.WebAuthn, error) {
	rp, err := cfg.Resolve(public)
	if err != nil {
		return nil, fmt.Errorf("auth: passkeys: %w", err)
	}
	if rp.RPID == "" {
		return nil, errPasskeysOff
	}
	w, err := webauthn.New(&webauthn.Config{
		RPID:          rp.RPID,
		RPDisplayName: "XCloak",
		RPOrigins:     rp.Origins,
		AuthenticatorSelection: protocol.AuthenticatorSelection{
			ResidentKey:        protocol.ResidentKeyRequirementRequired,
			RequireResidentKey: protocol.ResidentKeyRequired(),
			UserVerification:   protocol.VerificationPreferred,
		},
		AttestationPreference: protocol.PreferNoAttestation,
		// The browser's timeout; the server's is the ceremony's row
		// (passkeyCeremonyTTL), by the service's clock.
		Timeouts: webauthn.TimeoutsConfig{
			Login:        webauthn.TimeoutConfig{Timeout: passkeyCeremonyTTL, TimeoutUVD: passkeyCeremonyTTL},
			Registration: webauthn.TimeoutConfig{Timeout: passkeyCeremonyTTL, TimeoutUVD: passkeyCeremonyTTL},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("auth: passkeys: %w", err)
	}
	return w, nil
}

// passkeyUser is an account as the WebAuthn library sees it.
type passkeyUser struct {
	handle []byte
	email  string
	keys   []Passkey
}

func (u passkeyUser) WebAuthnID() []byte          { return u.handle }
func (u passkeyUser) WebAuthnName() string        { return u.email }
func (u passkeyUser) WebAuthnDisplayName() string { return u.email }

func (u passkeyUser) WebAuthnCredentials() []webauthn.Credential {
	creds := make([]webauthn.Credential, 0, len(u.keys))
	for _, k := range u.keys {
		creds = append(creds, k.credential())
	}
	return creds
}

// credential is the passkey as the library sees it.
func (k Passkey) credential() webauthn.Credential {
	transports := make([]protocol.AuthenticatorTransport, 0, len(k.Transports))
	for _, t := range k.Transports {
		transports = append(transports, protocol.AuthenticatorTransport(t))
	}
	return webauthn.Credential{
		ID: k.CredentialID, PublicKey: k.PublicKey, AttestationType: k.AttestationType, Transport: transports,
		Flags:         webauthn.NewCredentialFlags(flagsOf(k)),
		Authenticator: webauthn.Authenticator{AAGUID: k.AAGUID, SignCount: k.SignCount},
	}
}

// flagsOf rebuilds the authenticator flags the library checks an
// assertion's against (a credential not backup eligible cannot become so).
func flagsOf(k Passkey) protocol.AuthenticatorFlags {
	f := protocol.FlagUserPresent
	if k.UserVerified {
		f |= protocol.FlagUserVerified
	}
	if k.BackupEligible {
		f |= protocol.FlagBackupEligible
	}
	if k.BackupState {
		f |= protocol.FlagBackupState
	}
	return f
}

// PasskeysOn reports whether passkeys can be registered and used: the
// service has a store of them and a relying party (not at a public URL
// with an IP address). Pages offer passkeys only then.
func (s *Service) PasskeysOn() bool {
	return s.passkeys != nil && s.webauthn != nil && s.factors != nil
}

// passkeyStore returns the store of passkeys: ErrPasskeysOff without a
// relying party, ErrUnavailable without a store.
func (s *Service) passkeyStore() (PasskeyStore, error) {
	if s.webauthn == nil {
		return nil, ErrPasskeysOff
	}
	if !s.PasskeysOn() {
		return nil, fmt.Errorf("%w: no store of passkeys", ErrUnavailable)
	}
	return s.passkeys, nil
}
