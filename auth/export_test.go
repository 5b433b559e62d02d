package auth

// Sweep runs one round of the janitor for tests.
var Sweep = (*Service).sweep
