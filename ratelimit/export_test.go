package ratelimit

// Slot is slot, for tests that need rules whose keys share a cluster slot.
var Slot = slot
