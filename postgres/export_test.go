package postgres

// SearchQuery exposes searchQuery, whose plans the tests read.
var SearchQuery = searchQuery

// SearchUsersQuery exposes searchUsersQuery, whose plans the tests read.
var SearchUsersQuery = searchUsersQuery

// PrefixEnd exposes prefixEnd, whose edges a table test checks.
var PrefixEnd = prefixEnd
