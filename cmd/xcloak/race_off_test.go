//go:build !race

package main

// raceDetector is set when the tests run with -race, where an argon2id
// hash takes ten times as long (see TestTwoReplicasOnRedisCluster).
const raceDetector = false
