package web

// RoutePatterns lists the patterns the service answers under cfg, in the
// order routeTable gives them.
func RoutePatterns(cfg Config) []string {
	s := &Server{cfg: cfg}
	var out []string
	for _, r := range s.routeTable() {
		out = append(out, r.pattern)
	}
	return out
}

// CSVCell exposes csvCell.
var CSVCell = csvCell

// MaxStreamsPerSession is the bound on one session's live streams.
const MaxStreamsPerSession = maxStreamsPerSession

// MaxExportsPerSession is the bound on one session's exports at once.
const MaxExportsPerSession = maxExportsPerSession

// MaxStreams is the bound on a replica's live streams.
const MaxStreams = maxStreams
