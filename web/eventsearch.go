package web

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
	"github.com/xcloak/xcloak/templates"
)

// eventSearchQuery reads ?account=&network=&kind=&before= of the event
// search, its page, its export and its API. A parameter given twice is
// refused, not guessed at. before is a previous page's cursor. A network
// that is an address under one of the operator's translators is the IPv4
// address it embeds, which the events record.
func (s *Server) eventSearchQuery(v url.Values) (dashboard.EventSearch, error) {
	one := func(name string) (string, error) {
		if len(v[name]) > 1 {
			return "", &auth.FieldError{Field: name, Message: "is given more than once"}
		}
		return v.Get(name), nil
	}
	var fields [3]string
	for i, name := range []string{templates.FieldSearchAccount, templates.FieldSearchNetwork, templates.FieldSearchKind} {
		value, err := one(name)
		if err != nil {
			return dashboard.EventSearch{}, err
		}
		fields[i] = value
	}
	q, err := dashboard.ParseEventSearch(fields[0], s.translated(strings.TrimSpace(fields[1])), fields[2])
	if err != nil {
		return q, err
	}
	if before, ok := v["before"]; ok {
		c, err := parseActivityCursor(before[0])
		if len(before) != 1 || err != nil {
			return q, errBadCursor
		}
		q.Before = dashboard.EventCursor{At: c.At, ID: c.ID}
	}
	return q, nil
}

// searchCursor is the before= that continues after e.
func searchCursor(e dashboard.StoredEvent) string {
	return activityCursor(auth.Activity{At: e.At, ID: e.ID})
}

// searchURL is path with q's filters and before.
func searchURL(path string, q dashboard.EventSearch, before string) string {
	v := url.Values{}
	for name, s := range map[string]string{templates.FieldSearchAccount: q.Account, templates.FieldSearchNetwork: q.Network,
		templates.FieldSearchKind: q.Kind, "before": before} {
		if s != "" {
			v.Set(name, s)
		}
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// searchPage reads the page of events r asks for, and the cursor of the
// next page ("" on the last).
func (s *Server) searchPage(r *http.Request) (dashboard.EventSearch, []dashboard.StoredEvent, string, error) {
	q, err := s.eventSearchQuery(r.URL.Query())
	if err != nil {
		return q, nil, "", err
	}
	q.Limit = dashboard.SearchPage
	// A place for the read alone: the page is rendered, and read by its
	// browser, with the connection back in the pool.
	done, ok := s.dashboard.StartSearch()
	if !ok {
		return q, nil, "", errTooManySearches
	}
	defer done()
	var list []dashboard.StoredEvent
	if err := s.dashboard.SearchEvents(r.Context(), q, func(e dashboard.StoredEvent) error {
		list = append(list, e)
		return nil
	}); err != nil {
		return q, nil, "", err
	}
	next := ""
	if len(list) == q.Limit {
		next = searchCursor(list[len(list)-1])
	}
	return q, list, next, nil
}

// searchKinds are the kinds the event search offers, each in the words of
// its rows (eventRow), so that an administrator need not know the stored
// names to pick one.
var searchKinds = func() []templates.KindOption {
	out := make([]templates.KindOption, len(dashboard.SearchKinds))
	for i, kind := range dashboard.SearchKinds {
		out[i] = templates.KindOption{Kind: kind, Words: eventRow(dashboard.StoredEvent{Kind: kind}).What}
	}
	return out
}()

// handleEventSearch serves GET /admin/events.
func (s *Server) handleEventSearch() http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) error {
		q, list, next, err := s.searchPage(r)
		if err != nil {
			return err
		}
		in := r.URL.Query()
		props := templates.EventSearchProps{
			Nav:     navFor(sess),
			Account: in.Get(templates.FieldSearchAccount),
			Network: in.Get(templates.FieldSearchNetwork),
			Kind:    q.Kind,
			Kinds:   searchKinds,
			Now:     time.Now(),
			CSVHref: searchURL("/admin/events.csv", q, ""),
		}
		for _, e := range list {
			props.Rows = append(props.Rows, eventRow(e))
		}
		if next != "" {
			props.OlderHref = searchURL("/admin/events", q, next)
		}
		if q.Before.ID != 0 {
			props.NewestHref = searchURL("/admin/events", q, "")
		}
		s.render(w, r, http.StatusOK, templates.EventSearchPage(props))
		return nil
	})
}

// searchEventJSON is one event of GET /api/v1/admin/events.
type searchEventJSON struct {
	ID      int64             `json:"id"`
	At      time.Time         `json:"at"`
	Kind    string            `json:"kind"`
	Account string            `json:"account"`
	Network string            `json:"network"`
	Detail  map[string]string `json:"detail"`
}

// handleEventSearchAPI serves GET /api/v1/admin/events.
func (s *Server) handleEventSearchAPI() http.Handler {
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, _ auth.Session) error {
		_, list, next, err := s.searchPage(r)
		if err != nil {
			return err
		}
		out := struct {
			Events     []searchEventJSON `json:"events"`
			NextCursor string            `json:"next_cursor,omitempty"`
		}{Events: []searchEventJSON{}, NextCursor: next}
		for _, e := range list {
			out.Events = append(out.Events, searchEventJSON{ID: e.ID, At: e.At.UTC(), Kind: e.Kind, Account: e.Account, Network: e.Source, Detail: e.Detail})
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// handleEventExport serves GET /admin/events.csv: the events the filters
// select, newest first, at most dashboard.MaxSearchExport, streamed as
// they are read.
func (s *Server) handleEventExport() http.Handler {
	running := &streamCounts{n: map[string]int{}, max: maxExportsPerSession}
	return s.requireAdmin(func(w http.ResponseWriter, r *http.Request, sess auth.Session) error {
		q, err := s.eventSearchQuery(r.URL.Query())
		if err != nil {
			return err
		}
		written := 0
		defer func() {
			// An export of any event is recorded with how many were
			// written, however it ended (the reader gone, Postgres cut
			// short).
			if written > 0 {
				s.auth.RecordExport(byAdmin(sess), written, q.Account, q.Network, q.Kind)
			}
		}()
		h := w.Header()
		h.Set("Content-Type", "text/csv; charset=utf-8")
		h.Set("Content-Disposition", `attachment; filename="xcloak-events.csv"`)
		h.Set("Cache-Control", "no-store")
		if r.Method == http.MethodHead {
			// The headers alone: net/http would discard every row read,
			// and the export recorded would be of rows sent to no one.
			return nil
		}
		token := s.readCookie(r, sessionCookie)
		if !running.acquire(token) {
			h.Del("Content-Disposition")
			h.Del("Content-Type")
			return errTooManyExports
		}
		defer running.release(token)
		out := csvWriter{bufio.NewWriter(w)}
		rc := http.NewResponseController(w)
		started := false
		// Read a page at a time, each page whole before any of it is
		// written: a reader who reads slowly then holds no Postgres
		// connection while it waits, so a few exports cannot take the
		// pool from every sign-in.
		page := make([]dashboard.StoredEvent, 0, exportPage)
		for total := 0; total < dashboard.MaxSearchExport; {
			// The server's WriteTimeout bounds an ordinary answer, and a
			// whole export may take longer to read: each page gets a
			// deadline of its own instead, as each write of the live
			// stream does, so that a reader who keeps reading gets the
			// whole file and one who stops is still dropped.
			_ = rc.SetWriteDeadline(time.Now().Add(exportPageTimeout))
			if started && !s.stillAdmin(r.Context(), s.auth.Session, token) {
				if r.Context().Err() != nil {
					return nil // the reader went away, failing the check
				}
				// The session was revoked, or its administrator demoted or
				// disabled, since the export began: no page more, as no
				// request more. A reader who reads slowly would otherwise
				// go on taking events for as long as the export lasts.
				// The connection is cut, so that the file cannot be taken
				// for a whole one. Read from the store, not the proxies'
				// cache the stream uses: once a page, it costs nothing.
				_ = out.w.Flush()
				panic(http.ErrAbortHandler)
			}
			// A place among the replica's searches for each page's read
			// alone, as a search page holds one: a reader who reads slowly
			// holds none. The first page is refused (429) when none is
			// free; once the answer has begun a page waits for one, as
			// long as a page may take.
			var done func()
			if !started {
				var ok bool
				if done, ok = s.dashboard.StartSearch(); !ok {
					h.Del("Content-Disposition")
					h.Del("Content-Type")
					return errTooManySearches
				}
			} else {
				wait, cancel := context.WithTimeout(r.Context(), exportPageTimeout)
				done, err = s.dashboard.WaitSearch(wait)
				cancel()
				if err != nil && r.Context().Err() != nil {
					return nil // the reader went away
				}
				if err != nil {
					// Too late for a status: cut, as a failed page is.
					s.log.Error("exporting events: no place among the searches", "err", err)
					panic(http.ErrAbortHandler)
				}
			}
			q.Limit = min(exportPage, dashboard.MaxSearchExport-total)
			page = page[:0]
			err := s.dashboard.SearchEvents(r.Context(), q, func(e dashboard.StoredEvent) error {
				page = append(page, e)
				return nil
			})
			done()
			if err != nil && !started {
				// Nothing written yet: the error is answered as on every
				// route.
				h.Del("Content-Disposition")
				h.Del("Content-Type")
				return err
			}
			if err != nil && r.Context().Err() != nil {
				// The reader went away, which cut the read short: no one
				// is left to take the file for a whole one, and nothing
				// of the service's failed.
				return nil
			}
			if err != nil {
				// Too late for a status: the connection is cut, so that
				// the file cannot be taken for a whole one; the log says
				// why.
				s.log.Error("exporting events", "err", err)
				panic(http.ErrAbortHandler)
			}
			if !started {
				started = true
				_ = out.write("id", "time", "kind", "account", "network", "detail")
			}
			for _, e := range page {
				detail, _ := json.Marshal(e.Detail)
				if err := out.write(strconv.FormatInt(e.ID, 10), e.At.UTC().Format(time.RFC3339Nano),
					csvCell(e.Kind), csvCell(e.Account), csvCell(e.Source), csvCell(string(detail))); err != nil {
					return nil // the reader went away
				}
				written++
			}
			total += len(page)
			if len(page) < q.Limit {
				break
			}
			last := page[len(page)-1]
			q.Before = dashboard.EventCursor{At: last.At, ID: last.ID}
		}
		_ = out.w.Flush()
		return nil
	})
}

// csvWriter writes CSV records with every cell quoted. encoding/csv
// quotes only the cells that hold a comma, a quote, a line break or a
// leading space, and a spreadsheet that splits on ";" (the list separator
// of many locales) would split an unquoted x;=1+2@y.com, an address
// anyone can sign in with, and take its second half for a formula.
// Quoted, a cell is one cell whatever the separator.
type csvWriter struct{ w *bufio.Writer }

// write writes one record; an error is the reader's, gone away.
func (c csvWriter) write(cells ...string) error {
	for i, cell := range cells {
		if i > 0 {
			_ = c.w.WriteByte(',')
		}
		_ = c.w.WriteByte('"')
		_, _ = c.w.WriteString(strings.ReplaceAll(cell, `"`, `""`))
		_ = c.w.WriteByte('"')
	}
	return c.w.WriteByte('\n')
}

// exportPage is how many events an export reads from Postgres at once.
const exportPage = 1000

// exportPageTimeout is how long an export may take to read and write one
// page.
const exportPageTimeout = 30 * time.Second

// csvCell keeps a spreadsheet from taking a cell for a formula: a cell
// that begins with =, +, -, @, a tab or a carriage return gets a leading
// quote, as OWASP's advice on CSV injection has it. So does one that
// begins with any form of one of the four signs that NFKC, which some
// imports apply before they look for a formula, makes the sign itself
// (full-width ＝, small ﹢, superscript ⁺, ...); an address anyone tries
// to sign in with can begin with one.
func csvCell(s string) string {
	first, n := utf8.DecodeRuneInString(s)
	if s == "" {
		return s
	}
	if strings.ContainsRune("=+-@\t\r", first) {
		return "'" + s
	}
	if first >= utf8.RuneSelf {
		if f := norm.NFKC.String(s[:n]); f != "" && strings.ContainsRune("=+-@", rune(f[0])) {
			return "'" + s
		}
	}
	return s
}

// maxExportsPerSession bounds the exports one session runs at once on a
// replica. An export outlives the server's bound on an ordinary answer
// (exportPageTimeout a page) and holds a page of events while its reader
// reads: a stolen or scripted administrator's session could otherwise
// hold an unbounded number of connections, goroutines and pages, as
// maxStreamsPerSession keeps it from doing with streams.
const maxExportsPerSession = 2

// exportRetry is how long the answer to one export too many asks its
// browser to wait.
const exportRetry = 5 * time.Second

// searchRetry is how long the answer to a search or an export past the
// replica's bound (dashboard.Reader.StartSearch) asks its client to wait:
// a page takes at most searchTimeout, most far less.
const searchRetry = 5 * time.Second
