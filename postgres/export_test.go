package postgres

// SearchQuery exposes searchQuery, whose plans the tests read.
var SearchQuery = searchQuery

// SearchUsersQuery exposes searchUsersQuery, whose plans the tests read.
var SearchUsersQuery = searchUsersQuery

// PrefixEnd exposes prefixEnd, whose edges a table test checks.
var PrefixEnd = prefixEnd

// NetworkWalk is how many events a search by network reads in order.
const NetworkWalk = networkWalk

// SetActivityStep sets how many events a step of AccountActivity reads.
func (s *Store) SetActivityStep(n int) { s.activityStep = n }
