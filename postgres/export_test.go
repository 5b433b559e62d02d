package postgres

// SearchQuery exposes searchQuery, whose plans the tests read.
var SearchQuery = searchQuery
