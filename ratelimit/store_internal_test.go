package ratelimit

import (
	"errors"
	"io"
	"testing"
)

// refusal is an error reply of Redis.
type refusal string

func (r refusal) Error() string { return string(r) }
func (refusal) RedisError()     {}

// TestKeepFirstReportsMissedCalls: of the errors of several calls, the one
// reported is the first, but an error by which Redis did not answer comes
// before an error reply, whatever their order: a failback takes an error
// reply for Redis' answer, and forgets what it gave.
func TestKeepFirstReportsMissedCalls(t *testing.T) {
	wrong := refusal("WRONGTYPE Operation against a key holding the wrong kind of value")
	other := refusal("ERR another")
	for _, c := range []struct {
		name string
		errs []error
		want error
	}{
		{"none", []error{nil, nil}, nil},
		{"one refusal", []error{nil, wrong, nil}, wrong},
		{"the first refusal", []error{wrong, other}, wrong},
		{"an outage after a refusal", []error{wrong, nil, io.EOF, other}, io.EOF},
		{"an outage before a refusal", []error{io.EOF, wrong}, io.EOF},
	} {
		var got error
		for _, err := range c.errs {
			got = keepFirst(got, err)
		}
		if !errors.Is(got, c.want) && got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
