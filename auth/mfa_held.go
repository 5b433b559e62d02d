package auth

import (
	"context"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
	"time"
)

// Held second steps. While new-device verification holds a browser
// (verification.go), an enrolled factor stands in for the mailed link:
// the browser that typed the right password may finish with a code from
// its authenticator app, or a recovery code, and is signed in and made a
// known device as the link would have.
//
// Answering a held right password with a second step would tell a
// stuffing run which passwords were right. So every held answer carries
// a second step: the right password and a wrong one, an unknown account,
// a disabled one, an account with a factor or without, a breached
// password. Each is a sealed token (AES-256-GCM under a key derived from
// Config.Secret, which every replica shares), of the same length for the
// same address and made with the same work, and each sets the binding
// cookie as a second step does. Nothing is stored per held answer: a
// stuffing run cannot fill the database with them.
//
// The token holds its purpose and version, the normalised address, the
// account's id (0 for none), whether the password was right and usable
// (not for a wrong password, an unknown or disabled account, a breached
// password), a short keyed fingerprint of the account's password hash and
// sign-outs at that moment, the SHA-256 of the binding, its expiry and a random
// nonce. The address is padded to heldEmailBlock bytes: the length of a
// token says no more than the address its client typed.
//
// Its code (SecondStep) does the same work whatever the token says: it is
// counted by the second step's limits, per network and per account (by
// the token's address, an account or not), the account and its factors
// are read, the code is checked; and only when the password was right,
// its fingerprint still the account's, the account enabled and the code
// right does the sign-in finish. Every other case is ErrInvalidCode, the
// wrong code's answer. A right code spends the token's nonce
// (FactorStore.SpendHeldMFA): a held token signs in once. The passkeys'
// second step takes no held token (it would list the account's
// passkeys): passkey owners sign in with "Sign in with a passkey", which
// holds no one.

const (
	// heldVersion is the first byte of a held token's sealed contents:
	// its purpose and the layout's version.
	heldVersion byte = 1
	// heldEmailBlock pads the address in a held token to a multiple of
	// its size.
	heldEmailBlock = 64
	// heldPrintLen is the length of the password hash's fingerprint.
	heldPrintLen = 8
	heldNonceLen = 16
	// heldFixed is the length of the contents but the address: version,
	// usable, address length, user id, fingerprint, binding hash, expiry
	// and nonce.
	heldFixed = 1 + 1 + 1 + 8 + heldPrintLen + sha256.Size + 8 + heldNonceLen
)

// maxHeldTokenChars bounds a held token before any work: the longest
// address, padded, sealed with its GCM nonce and tag, in base64url.
var maxHeldTokenChars = base64.RawURLEncoding.EncodedLen(12 + heldFixed + paddedEmailLen(MaxEmailBytes) + 16)

// heldAD is the associated data of every held token.
var heldAD = []byte("xcloak held second step")

// paddedEmailLen is the length of an address of n bytes padded in a held
// token.
func paddedEmailLen(n int) int {
	return max(1, (n+heldEmailBlock-1)/heldEmailBlock) * heldEmailBlock
}

// IsHeldToken reports whether token has the form of a held second step's
// (a normal one's is 43 characters), without opening it: the second
// step's page takes one as the held page's.
func IsHeldToken(token string) bool {
	return len(token) > 43 && len(token) <= maxHeldTokenChars
}

// heldKeys seal held tokens and fingerprint password hashes.
type heldKeys struct {
	aead  cipher.AEAD
	print []byte
}

func newHeldKeys(secret []byte) heldKeys {
	return heldKeys{aead: newAEAD(deriveKey(secret, "held-second-step")), print: deriveKey(secret, "held-password-print")}
}

// passwordPrint is the fingerprint a held token holds of the account's
// password hash and its User.SignOuts: a password replaced, or the
// account signed out everywhere, since the held answer leaves its code
// nothing to finish.
func (k heldKeys) passwordPrint(passwordHash string, signOuts int64) []byte {
	m := hmac.New(sha256.New, k.print)
	m.Write(binary.BigEndian.AppendUint64(nil, uint64(signOuts)))
	m.Write([]byte(passwordHash))
	return m.Sum(nil)[:heldPrintLen]
}

// heldStep is the contents of a held token.
type heldStep struct {
	// usable: the password was right, the account enabled and the
	// password not breached.
	usable      bool
	email       string
	userID      int64
	print       []byte
	bindingHash []byte
	expires     time.Time
	nonce       []byte
}

// seal makes the token of h.
func (k heldKeys) seal(h heldStep) string {
	plain := make([]byte, 0, heldFixed+paddedEmailLen(len(h.email)))
	usable := byte(0)
	if h.usable {
		usable = 1
	}
	plain = append(plain, heldVersion, usable, byte(len(h.email)))
	plain = binary.BigEndian.AppendUint64(plain, uint64(h.userID))
	plain = append(plain, h.print...)
	plain = append(plain, h.bindingHash...)
	plain = binary.BigEndian.AppendUint64(plain, uint64(h.expires.UnixMilli()))
	plain = append(plain, h.nonce...)
	plain = append(plain, h.email...)
	plain = append(plain, make([]byte, paddedEmailLen(len(h.email))-len(h.email))...)
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(k.aead.Seal(nonce, nonce, plain, heldAD))
}

// open opens a held token for the browser whose binding cookie is
// binding; ErrInvalidToken if it is not one this service sealed, for
// that browser, unexpired at now.
func (k heldKeys) open(token, binding string, now time.Time) (heldStep, error) {
	if !IsHeldToken(token) || !wellFormedToken(binding) {
		return heldStep{}, ErrInvalidToken
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	ns := k.aead.NonceSize()
	if err != nil || len(raw) < ns+k.aead.Overhead() {
		return heldStep{}, ErrInvalidToken
	}
	p, err := k.aead.Open(nil, raw[:ns], raw[ns:], heldAD)
	if err != nil || len(p) < heldFixed || p[0] != heldVersion {
		return heldStep{}, ErrInvalidToken
	}
	n := int(p[2])
	if len(p) != heldFixed+paddedEmailLen(n) {
		return heldStep{}, ErrInvalidToken
	}
	h := heldStep{usable: p[1] == 1, userID: int64(binary.BigEndian.Uint64(p[3:]))}
	rest := p[11:]
	h.print, rest = rest[:heldPrintLen], rest[heldPrintLen:]
	h.bindingHash, rest = rest[:sha256.Size], rest[sha256.Size:]
	h.expires, rest = time.UnixMilli(int64(binary.BigEndian.Uint64(rest))), rest[8:]
	h.nonce, rest = rest[:heldNonceLen], rest[heldNonceLen:]
	h.email = string(rest[:n])
	if subtle.ConstantTimeCompare(h.bindingHash, hashToken(binding)) != 1 || !now.Before(h.expires) {
		return heldStep{}, ErrInvalidToken
	}
	return h, nil
}

// heldAnswer is the second step every held answer carries, for the
// address user.Email, the account user.ID (0 for none) whose password
// hash is user.PasswordHash ("" for none), usable when its password was
// right and may sign in. The same work in every case; none without a
// store of factors, in every case too.
func (s *Service) heldAnswer(user User, usable bool) (LoginResult, *heldStep) {
	if s.factors == nil {
		return LoginResult{}, nil
	}
	binding, bindingHash := newToken()
	h := heldStep{usable: usable, email: user.Email, userID: user.ID, print: s.held.passwordPrint(user.PasswordHash, user.SignOuts),
		bindingHash: bindingHash, expires: s.now().Add(s.cfg.MFA.ChallengeTTL), nonce: make([]byte, heldNonceLen)}
	rand.Read(h.nonce)
	return LoginResult{MFA: MFAStep{Token: s.held.seal(h), Binding: binding, ExpiresAt: h.expires}}, &h
}

// heldSecondStep is SecondStep for a held token: see above.
func (s *Service) heldSecondStep(ctx context.Context, fs FactorStore, req SecondStepRequest, code string) (LoginResult, error) {
	h, err := s.held.open(req.Token, req.Binding, s.now())
	if err != nil {
		return LoginResult{}, err
	}
	// Counted under its address, sealed in the token, before the account
	// is looked up: anyone gets a held token, and may send it again and
	// again, so past the limits it costs no query.
	if err := s.admitCode(ctx, req.Client, User{Email: h.email}, heldAnswer, bothCounts); err != nil {
		return LoginResult{}, err
	}
	// Admitted: a code spent is recorded, and its step finished, whether
	// or not the client waits, as in SecondStep.
	ctx, cancel := s.afterDecision(ctx)
	defer cancel()
	user, err := s.UserByEmail(ctx, h.email)
	switch {
	case errors.Is(err, ErrNoUser):
		user = User{Email: h.email}
	case err != nil:
		return LoginResult{}, err
	}
	usable := h.usable && user.ID != 0 && user.ID == h.userID && !user.Disabled() &&
		subtle.ConstantTimeCompare(s.held.passwordPrint(user.PasswordHash, user.SignOuts), h.print) == 1
	ownLocked, err := s.countHeldCodeAsOwn(ctx, user, usable, req.Client)
	if err != nil {
		return LoginResult{}, err
	}
	usable = usable && !ownLocked
	kind, err := s.checkCode(ctx, fs, user, true, usable, code, req.Client.Source(), fs.UseRecoveryCode)
	if err != nil {
		return LoginResult{}, err
	}
	s.clearSecondStepFailures(ctx, heldAccount(h.email))
	s.clearSecondStepFailures(ctx, h.email)
	// The nonce is spent only now, by a right code: of two racing, one
	// finds it spent.
	switch spent, err := fs.SpendHeldMFA(ctx, h.spentMark(user, s.now())); {
	case err != nil:
		return LoginResult{}, s.dbDown("spending held second step", err)
	case !spent:
		return LoginResult{}, ErrInvalidToken
	}
	return s.stepSignedIn(ctx, user, req, kind, user.PasswordHash, false)
}

// countHeldCodeAsOwn counts a held token's code towards the account's own
// lock (RuleMFAAccount, as its own step's codes) when the token is usable:
// its password was right, as sealed in it, and is still the account's.
// So whoever has the password gets no more guesses at the codes for being
// held, the threshold counting the own step's and the held answers'
// codes together, and a token whose password has been replaced since
// counts towards no owner's lock. It reports the own step locked already;
// the code is then checked as an unusable token's is, and refused as
// wrong: answered with the lock's 429 it would tell a stuffing run the
// password was right. Every other token's code counts towards
// heldNobody, which nothing reads, so that each does the same work
// whatever its password was.
func (s *Service) countHeldCodeAsOwn(ctx context.Context, user User, usable bool, c Client) (bool, error) {
	id := heldNobody
	if usable {
		id = user.Email
	}
	f, err := s.limits.Fail(ctx, RuleMFAAccount, id, "")
	if err != nil {
		return false, unavailable("counting second-step attempt", err)
	}
	if !usable {
		return false, nil
	}
	if f.LockedNow {
		s.recordHeldLockout(ctx, user.Email, user, false, f)
		s.record(codeEvent(EventMFALockout, user, c.Source(), false, map[string]string{"level": strconv.Itoa(f.Level),
			"until": s.now().Add(f.LockedFor).UTC().Format(time.RFC3339)}, RuleMFAAccount))
	}
	return f.Failures == 0, nil
}

// heldNobody is what RuleMFAAccount counts the codes of held tokens of a
// wrong password as (countHeldCodeAsOwn): one count, whatever their
// address, never read. No address lacks an "@", so no account's count is
// this one.
const heldNobody = "held nobody"

// heldAccount is what RuleMFAAccount counts a held token's codes as, for
// the address email: apart from the account's own second step. Anyone
// gets held answers for any address, without its password; were their
// codes counted as the account's, five of them would lock its owner out
// of the second step the mailed link leads to, and of the one the
// password gets once attack mode is off (keycloak#46164). Counted apart,
// they lock the held answers' code of that address alone: the owner
// still has the link. No address has a space, so no account's count is
// this one.
func heldAccount(email string) string { return heldAccountPrefix + email }

const heldAccountPrefix = "held "

// passwordlessAccount is the identity under which RuleMFAAccount counts
// the passkeys tried alone naming a credential of the account email: apart
// from its second step after the password, as a held answer's codes are.
// A credential id is no secret (a second step lists the account's to
// whoever typed the password once), so whoever saw one could otherwise
// lock the owner's codes and passkeys without the password; counted
// apart, they lock the passkey alone, and the owner still has the
// password and its second step.
func passwordlessAccount(email string) string { return passwordlessAccountPrefix + email }

const passwordlessAccountPrefix = "passkey "

// spentMark is the row that marks h spent (FactorStore.SpendHeldMFA): by
// the SHA-256 of its nonce, which no normal step's token hashes to, until
// it expires.
func (h heldStep) spentMark(user User, now time.Time) MFAChallenge {
	sum := sha256.Sum256(append([]byte("xcloak held second step spent "), h.nonce...))
	return MFAChallenge{TokenHash: sum[:], BindingHash: h.bindingHash, UserID: user.ID, Email: user.Email,
		PasswordHash: user.PasswordHash, CreatedAt: now, ExpiresAt: h.expires}
}

// spendBreachedHeld spends the held token of a right password the mail's
// job found breached: it signs in no browser, as a breached password
// does not. A code typed before the job ran is not caught.
func (s *Service) spendBreachedHeld(ctx context.Context, user User, h *heldStep) {
	if h == nil || !h.usable || s.factors == nil {
		return
	}
	if _, err := s.factors.SpendHeldMFA(ctx, h.spentMark(user, s.now())); err != nil {
		s.metrics.dbErrors.Inc()
		s.log.WarnContext(ctx, "held second step of a breached password not spent", "err", err)
	}
}
