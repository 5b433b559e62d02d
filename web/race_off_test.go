//go:build !race

package web

// raceDetector is set when the tests run with -race, where sync.Pool
// drops some of what it is given and allocation counts mean little.
const raceDetector = false
