package auth

import "sync"

// resetsPerDomain bounds the reset mails sent to one recipient domain at
// once, so that a slow or hostile mail server holds at most that many of
// the resetWorkers and the others go on serving every other domain.
const resetsPerDomain = resetWorkers / 2

// What domainSenders.start decides.
const (
	domainSend  = iota // send it now
	domainWaits        // the domain is busy: the job waits its turn
	domainFull         // too many jobs wait already: drop it
)

// domainSenders counts the reset mails being sent per recipient domain and
// keeps the jobs waiting for a busy one. The jobs waiting are bounded by
// resetQueue, like those in the queue.
type domainSenders struct {
	mu      sync.Mutex
	sending map[string]int
	waiting map[string][]linkJob
	waits   int
}

// start decides whether job, for domain, is sent now, waits for a mail to
// the domain to finish (next hands it out then), or is dropped.
func (d *domainSenders) start(domain string, job linkJob) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sending == nil {
		d.sending, d.waiting = map[string]int{}, map[string][]linkJob{}
	}
	if d.sending[domain] < resetsPerDomain {
		d.sending[domain]++
		return domainSend
	}
	if d.waits >= resetQueue {
		return domainFull
	}
	d.waiting[domain] = append(d.waiting[domain], job)
	d.waits++
	return domainWaits
}

// next is called when a mail to domain has been handled: it returns the
// next job waiting for the domain, which takes over the finished mail's
// place, or frees that place.
func (d *domainSenders) next(domain string) (linkJob, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if q := d.waiting[domain]; len(q) > 0 {
		job := q[0]
		if len(q) == 1 {
			delete(d.waiting, domain)
		} else {
			d.waiting[domain] = q[1:]
		}
		d.waits--
		return job, true
	}
	if d.sending[domain]--; d.sending[domain] <= 0 {
		delete(d.sending, domain)
	}
	return linkJob{}, false
}
