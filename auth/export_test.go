package auth

// Sweep runs one round of the janitor for tests.
var Sweep = (*Service).sweep

// AddDevice adds a known device for tests, as a sign-in that verified
// passwordHash would.
var AddDevice = (*Service).addDevice
