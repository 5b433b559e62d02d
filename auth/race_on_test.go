//go:build race

package auth

// raceDetector is set when the tests run with -race, where sync.Pool
// drops what it is given at random and allocation counts mean nothing.
const raceDetector = true
