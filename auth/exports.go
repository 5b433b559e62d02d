package auth

import "strconv"

// RecordExport records that by ("admin:<email>") downloaded rows events of
// the event search, with its filters (those given, "" for none), as an
// EventEventsExported: an export holds addresses and networks by the
// thousand, and who took which is part of the audit trail.
func (s *Service) RecordExport(by string, rows int, account, network, kind string) {
	detail := map[string]string{"by": by, "rows": strconv.Itoa(rows)}
	for k, v := range map[string]string{"account": account, "network": network, "kind": kind} {
		if v != "" {
			detail[k] = v
		}
	}
	s.record(Event{Kind: EventEventsExported, Detail: detail})
}
