package auth

import (
	"context"
	"sync"
)

// Sweep runs one round of the janitor for tests.
var Sweep = (*Service).sweep

// ResetsPending reports how many reset requests are queued or being
// handled, so tests can wait until the workers are idle.
func ResetsPending(s *Service) int64 { return s.resetsPending.Load() }

// AddDevice adds a known device for tests, as a sign-in that verified
// passwordHash would.
var AddDevice = (*Service).addDevice

// SendMail sends msg through the Mailer the service holds, as its flows do.
func SendMail(ctx context.Context, s *Service, msg Message) error {
	return s.mailer.Send(ctx, msg)
}

// HeldMail makes the mail of a sign-in of user held for new-device
// verification, its password known to be breached or not, as the mail
// worker does.
func HeldMail(ctx context.Context, s *Service, user User, breached bool) (Message, error) {
	return s.signInMail(ctx, user, linkJob{email: user.Email, at: s.now(),
		signIn: &heldSignIn{userID: user.ID, passwordHash: user.PasswordHash, breached: breached}})
}

// NoticeBrowser is noticeBrowser, for its table test.
var NoticeBrowser = noticeBrowser

// EndLockouts runs one round of the lockouts' ends for tests.
var EndLockouts = (*Service).endLockouts

// HoldHashes makes every hash h computes from now on stay in flight, in
// its slot, until release is called; it returns at once.
func HoldHashes(h *Hasher) (release func()) {
	gate := make(chan struct{})
	h.inSlot = func() { <-gate }
	return sync.OnceFunc(func() { close(gate) })
}

// GivingWayToReturning is the number of hashes of h waiting for a
// returning browser's sign-in in flight.
func GivingWayToReturning(h *Hasher) int { return h.Stats().HashesGivingWay }

// InFlight is what h counts in flight: password checks, which rejections
// give way to, and returning browsers' sign-ins, which other hashes give
// way to.
func InFlight(h *Hasher) (checks, returning int64) { return h.checks.n.Load(), h.trusted.n.Load() }

// SessionCachePurges reports how many times s's proxy session cache was
// emptied.
func SessionCachePurges(s *Service) uint64 {
	s.sessionCache.mu.RLock()
	defer s.sessionCache.mu.RUnlock()
	return s.sessionCache.gen
}

// CountHashes makes every key h derives from now on count into the
// returned counter.
var CountHashes = countHashes

// HashToken is the hash a token is stored under.
var HashToken = hashToken

// OnLegacyWait makes s call f each time a sign-out begins to wait for the
// answer about untagged sessions being asked by another request.
func OnLegacyWait(s *Service, f func()) { s.legacySessions.waiting = f }
