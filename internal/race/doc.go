// Package race tells whether the binary was built with -race, for tests
// whose figures the race detector changes: it makes sync.Pool drop what
// it is given at random, so allocation counts mean nothing, and it makes
// an argon2id hash about ten times slower.
package race
