package web

import (
	"fmt"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
)

// TestFieldCapHoldsAuthBounds: a field as long as auth allows must pass
// checkField, or a valid email or password would be refused as malformed.
func TestFieldCapHoldsAuthBounds(t *testing.T) {
	for name, n := range map[string]int{"email": auth.MaxEmailBytes, "password": auth.MaxPasswordBytes} {
		if err := checkField(strings.Repeat("a", n)); err != nil {
			t.Errorf("checkField of a %s of %d bytes = %v, want nil", name, n, err)
		}
	}
}

// TestWeakPasswordStatesAuthRules: the answer to a refused new password
// states the bounds auth applies.
func TestWeakPasswordStatesAuthRules(t *testing.T) {
	got := problemFor(auth.ErrWeakPassword).message
	for _, want := range []string{
		fmt.Sprintf("at least %d characters", auth.MinPasswordRunes),
		fmt.Sprintf("at most %d bytes", auth.MaxPasswordBytes),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("message %q does not say %q", got, want)
		}
	}
}

func TestHasDuplicateKeys(t *testing.T) {
	for in, want := range map[string]bool{
		`{"email":"a","password":"b"}`:                      false,
		`{"email":"a","email":"b"}`:                         true,
		`{"email":"a","EMAIL":"b"}`:                         true,
		`{"email":"a","em\u0061il":"b"}`:                    true,
		"{\"password\":\"a\",\"pa\u017f\u017fword\":\"b\"}": true, // the long s folds to s
		"{\"token\":\"a\",\"to\u212aen\":\"b\"}":            true, // the Kelvin sign folds to k
		"{\"stra\u00dfe\":1,\"strasse\":2}":                 false,
		`{"a":{},"a":1}`:                                    true,
		`{"a":{"b":1,"c":2},"d":[1,{"b":1}],"b":3}`:         false,
		`{"a":{"b":1,"b":2}}`:                               true,
		`{"a":[{"x":1},{"x":1,"x":2}]}`:                     true,
		`[{"x":1},{"x":2}]`:                                 false,
		`{"a":[[],{}],"a":null}`:                            true,
		`{"a":"a","b":"a"}`:                                 false,
		`{"a":[],"b":{},"c":null,"d":true,"e":1.5}`:         false,
		`not json`: false,
		`{"a":1,`:  false,
		`{"outer":{"inner":{"k":1}},"outer2":{"k":{}}}`:          false,
		`{"outer":{"inner":{"k":1,"K":2}},"outer2":{}}`:          true,
		`{"x":[1,2,3],"y":[4,5],"x":[]}`:                         true,
		`{"email":"a","password":"b"} {"email":"a"}`:             false,
		`{"email":"a","password":"b"} {"email":"a","email":"b"}`: true,
	} {
		if got := hasDuplicateKeys([]byte(in)); got != want {
			t.Errorf("hasDuplicateKeys(%s) = %v, want %v", in, got, want)
		}
	}
}

func TestHasLoneSurrogate(t *testing.T) {
	for in, want := range map[string]bool{
		`{"p":"plain"}`:                   false,
		`{"p":"\ud83d\ude00"}`:            false, // a pair: one emoji
		`{"p":"\uD83D\uDE00"}`:            false,
		`{"p":"\u00e4\u0000"}`:            false,
		`{"p":"\ud800"}`:                  true,
		`{"p":"\udfff"}`:                  true,
		`{"p":"\ud800x"}`:                 true,
		`{"p":"\ud800\u0041"}`:            true,
		`{"p":"\ud800\ud800\udc00"}`:      true,
		`{"p":"\udc00\ud800"}`:            true,
		`{"p":"\\ud800"}`:                 false, // an escaped backslash, then text
		`{"p":"\\\ud800"}`:                true,
		`{"p":"\"\ud800"}`:                true,
		`{"p":"\ud8"}`:                    false, // not JSON: encoding/json refuses it
		`{"\udbff\udfff":"\ud800\udc00"}`: false,
		`{"\udbff":"x"}`:                  true,
	} {
		if got := hasLoneSurrogate([]byte(in)); got != want {
			t.Errorf("hasLoneSurrogate(%s) = %v, want %v", in, got, want)
		}
	}
}

// TestDecodeStrictNamesAreExact: a body whose fields are not all strings
// (the second step's remember, a passkey's credential) has no fast path,
// and is read by encoding/json alone, which takes a key in any case for
// its field. The contract's names are exact, as for a body of strings: a
// key in another case is refused, never read as the field.
func TestDecodeStrictNamesAreExact(t *testing.T) {
	for _, tc := range []struct {
		body string
		dst  any
	}{
		{`{"mfa_token":"t","code":"123456","Remember":true}`, new(mfaBody)},
		{`{"mfa_token":"t","CODE":"123456"}`, new(mfaBody)},
		{`{"MFA_Token":"t","credential":{}}`, new(passkeyStepBody)},
		{`{"mfa_token":"t","credential":{},"REMEMBER":true}`, new(passkeyStepBody)},
		{`{"Credential":{"id":"x"}}`, new(passkeySignInBody)},
		{"{\"mfa_to\u212aen\":\"t\",\"credential\":{}}", new(passkeyStepBody)}, // the Kelvin sign folds to k
	} {
		if err := decodeStrict([]byte(tc.body), tc.dst); err == nil {
			t.Errorf("%s: read as %+v; want refused", tc.body, tc.dst)
		}
	}
	// The names as the contract writes them are read.
	var in mfaBody
	if err := decodeStrict([]byte(`{"mfa_token":"t","code":"123456","remember":true}`), &in); err != nil || !in.Remember || in.Code != "123456" {
		t.Errorf("exact names: %+v, %v", in, err)
	}
}
