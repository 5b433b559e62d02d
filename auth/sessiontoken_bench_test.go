package auth

import "testing"

// BenchmarkSessionTokenTag: what a session token's tag check costs, the
// work every page, every forward-auth miss and every sign-out does before
// any query, a made-up cookie's whole cost.
func BenchmarkSessionTokenTag(b *testing.B) {
	k := newSessionTokens([]byte("0123456789abcdef0123456789abcdef"))
	token, _ := k.new()
	b.ReportAllocs()
	for b.Loop() {
		if k.shape(token) != tokenTagged {
			b.Fatal("a token this service made fails its tag")
		}
	}
}
