package auth

// Sweep runs one round of the janitor for tests.
var Sweep = (*Service).sweep

// ResetsPending reports how many reset requests are queued or being
// handled, so tests can wait until the workers are idle.
func ResetsPending(s *Service) int64 { return s.resetsPending.Load() }
