package auth

import "testing"

// TestDomainSenders: a domain gets resetsPerDomain mails at once; the
// jobs past that wait, at most resetQueue of them, and are handed out one
// by one as mails finish; the last finish frees the domain.
func TestDomainSenders(t *testing.T) {
	var d domainSenders
	for i := range resetsPerDomain {
		if got := d.start("busy.example", linkJob{}); got != domainSend {
			t.Fatalf("mail %d: %d, want sent at once", i, got)
		}
	}
	if got := d.start("other.example", linkJob{}); got != domainSend {
		t.Fatalf("another domain: %d, want sent at once", got)
	}
	for i := range resetQueue {
		if got := d.start("busy.example", linkJob{email: "w"}); got != domainWaits {
			t.Fatalf("job %d for the busy domain: %d, want it to wait", i, got)
		}
	}
	if got := d.start("busy.example", linkJob{}); got != domainFull {
		t.Fatalf("past %d waiting jobs: %d, want dropped", resetQueue, got)
	}
	for i := range resetQueue {
		if job, ok := d.next("busy.example"); !ok || job.email != "w" {
			t.Fatalf("finish %d: %+v %v, want the next waiting job", i, job, ok)
		}
	}
	for range resetsPerDomain {
		if _, ok := d.next("busy.example"); ok {
			t.Fatal("a job handed out with none waiting")
		}
	}
	d.next("other.example")
	if len(d.sending) != 0 || len(d.waiting) != 0 || d.waits != 0 {
		t.Fatalf("after every mail finished: sending %v, waiting %d, waits %d", d.sending, len(d.waiting), d.waits)
	}
}
