package postgres

// SearchQuery exposes searchQuery, whose plans the tests read.
var SearchQuery = searchQuery

// SearchUsersQuery exposes searchUsersQuery, whose plans the tests read.
var SearchUsersQuery = searchUsersQuery
