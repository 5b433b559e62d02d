package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/xcloak/xcloak/internal/race"
)

// flatBody is the shape of a sign-in's body.
type flatBody struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

// flatSeeds are bodies the fast path should take, and bodies it must
// leave to encoding/json: escapes, other keys, a key twice (exactly or
// folded), nulls, trailing data, an array.
var flatSeeds = []string{
	`{"email":"a@example.com","password":"pw"}`,
	` { "password" : "pw" , "email" : "a@example.com" } ` + "\n",
	`{}`,
	`{"email":"a@example.com"}`,
	`{"email":"","password":""}`,
	`{"email":"ünïcode@example.com","password":"p\u00e4ss"}`,
	`{"email":"a@example.com","password":"p\"w"}`,
	`{"email":"a@example.com","email":"b@example.com","password":"pw"}`,
	`{"email":"a@example.com","Email":"b@example.com","password":"pw"}`,
	`{"EMAIL":"a@example.com","password":"pw"}`,
	`{"email":"a@example.com","password":"pw","admin":"yes"}`,
	`{"email":null,"password":"pw"}`,
	`{"email":1,"password":"pw"}`,
	`{"email":"a@example.com","password":"pw"}{}`,
	`{"email":"a@example.com","password":"pw"} x`,
	`{"email":"a@example.com",}`,
	`{"email" "a@example.com"}`,
	`[{"email":"a@example.com"}]`,
	`{"email":"a@example.com","password":"pw"`,
	"{\"email\":\"a\tb\",\"password\":\"pw\"}",
	`{"paſſword":"pw","email":"a@example.com"}`,
	``,
	`  `,
}

// FuzzDecodeFlat checks the fast path against encoding/json: whatever
// body the fast path accepts, the strict decoder accepts too and reads
// to the same struct.
func FuzzDecodeFlat(f *testing.F) {
	for _, s := range flatSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) {
			return
		}
		var fast flatBody
		if !decodeFlatInto(body, &fast) {
			if fast != (flatBody{}) {
				t.Fatalf("%q: fast path refused the body but wrote %+v", body, fast)
			}
			return
		}
		var strict flatBody
		if err := decodeStrict(body, &strict); err != nil {
			t.Fatalf("%q: fast path read %+v, encoding/json refused it: %v", body, fast, err)
		}
		if fast != strict {
			t.Fatalf("%q: fast path read %+v, encoding/json %+v", body, fast, strict)
		}
	})
}

func TestDecodeFlatTakesCommonBodies(t *testing.T) {
	tests := []struct {
		body string
		want flatBody
	}{
		{`{"email":"a@example.com","password":"pw"}`, flatBody{"a@example.com", "pw"}},
		{` { "password" : "pw" , "email" : "a@example.com" } ` + "\n", flatBody{"a@example.com", "pw"}},
		{`{"email":"ünï@example.com"}`, flatBody{Email: "ünï@example.com"}},
		{`{}`, flatBody{}},
	}
	for _, tt := range tests {
		var got flatBody
		if !decodeFlatInto([]byte(tt.body), &got) {
			t.Errorf("%q: fast path refused it", tt.body)
			continue
		}
		if got != tt.want {
			t.Errorf("%q: got %+v, want %+v", tt.body, got, tt.want)
		}
	}
}

func TestDecodeFlatLeavesTheRestToEncodingJSON(t *testing.T) {
	for _, body := range []string{
		`{"email":"a@example.com","password":"p\"w"}`,
		`{"email":"a@example.com","email":"b@example.com"}`,
		`{"EMAIL":"a@example.com"}`,
		`{"email":"a@example.com","admin":"yes"}`,
		`{"email":null}`,
		`{"email":"a@example.com"}{}`,
		`[]`,
	} {
		var got flatBody
		if decodeFlatInto([]byte(body), &got) {
			t.Errorf("%q: fast path took it, read %+v", body, got)
		}
	}
}

// A struct the fast path cannot fill in full has no plan: its every body
// goes to encoding/json.
func TestFlatPlanOnlyForStringFieldsWithNames(t *testing.T) {
	type withNumber struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	type withRaw struct {
		Name string          `json:"name"`
		Raw  json.RawMessage `json:"raw"`
	}
	type untagged struct {
		Name string
	}
	type foldedTwice struct {
		A string `json:"key"`
		B string `json:"KEY"`
	}
	for _, v := range []any{&withNumber{}, &withRaw{}, &untagged{}, &foldedTwice{}, flatBody{}} {
		if f := flatFieldsOf(reflect.TypeOf(v)); f != nil {
			t.Errorf("%T: got a fast path %v, want none", v, f.names)
		}
	}
	if f := flatFieldsOf(reflect.TypeOf(&flatBody{})); f == nil || !reflect.DeepEqual(f.names, []string{"email", "password"}) {
		t.Errorf("flatBody: got %+v, want the names email, password", f)
	}
}

// upperText is a string that decodes itself, as encoding/json lets any
// type do.
type upperText string

func (u *upperText) UnmarshalText(b []byte) error {
	*u = upperText(strings.ToUpper(string(b)))
	return nil
}

// upperJSON is upperText through json.Unmarshaler.
type upperJSON string

func (u *upperJSON) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*u = upperJSON(strings.ToUpper(s))
	return nil
}

// A field encoding/json reads otherwise than as the string itself (the
// ,string option, which wants a JSON string inside the string, or a type
// that decodes itself) gives its struct no fast path: decodeJSON reads
// each of these bodies as encoding/json does.
func TestFlatPlanNoneForFieldsThatDecodeThemselves(t *testing.T) {
	type quoted struct {
		N string `json:"n,string"`
	}
	type text struct {
		N upperText `json:"n"`
	}
	type unmarshaler struct {
		N upperJSON `json:"n"`
	}
	type omitempty struct {
		N string `json:"n,omitempty"`
	}
	for _, v := range []any{&quoted{}, &text{}, &unmarshaler{}} {
		if f := flatFieldsOf(reflect.TypeOf(v)); f != nil {
			t.Errorf("%T: got a fast path %v, want none", v, f.names)
		}
	}
	if f := flatFieldsOf(reflect.TypeOf(&omitempty{})); f == nil {
		t.Errorf("omitempty: got no fast path, want one")
	}
	body := []byte(`{"n":"abc"}`)
	var q quoted
	if decodeFlatInto(body, &q) {
		t.Errorf("n,string: fast path read %+v, encoding/json refuses the body", q)
	}
	var tx text
	if decodeFlatInto(body, &tx) && tx.N != "ABC" {
		t.Errorf("UnmarshalText: fast path read %+v, encoding/json reads ABC", tx)
	}
	var u unmarshaler
	if decodeFlatInto(body, &u) && u.N != "ABC" {
		t.Errorf("UnmarshalJSON: fast path read %+v, encoding/json reads ABC", u)
	}
}

// decodeQuestion returns a function that reads the decision API's
// question, the body an application sends for every attempt it asks
// about, from a request whose body it sets anew each time.
func decodeQuestion(tb testing.TB) func() {
	const body = `{"kind":"login","account":"ann@example.com","client_ip":"203.0.113.7","device":"d3v1c3-0f-4nn"}`
	r := httptest.NewRequest(http.MethodPost, "/api/v1/attempts", nil)
	r.Header.Set("Content-Type", "application/json")
	reader := &strings.Reader{}
	r.Body = io.NopCloser(reader)
	return func() {
		reader.Reset(body)
		var in attemptBody
		if err := decodeFields(r, &in); err != nil || in.Device == "" {
			tb.Fatalf("decoded %+v, %v", in, err)
		}
	}
}

func BenchmarkDecodeFields(b *testing.B) {
	decode := decodeQuestion(b)
	b.ReportAllocs()
	for b.Loop() {
		decode()
	}
}

// decodeFieldsAllocs is what reading the decision API's common question
// allocates: its strings and the struct they go into, which decodeFields
// is given as an interface.
const decodeFieldsAllocs = 5

// TestDecodeFieldsAllocations: the decision API's common question is read
// by the fast path of plain strings, not by encoding/json (82
// allocations), in a pooled buffer.
func TestDecodeFieldsAllocations(t *testing.T) {
	if race.Enabled {
		t.Skip("allocation counts under -race count what sync.Pool drops")
	}
	if got := testing.AllocsPerRun(200, decodeQuestion(t)); got > decodeFieldsAllocs {
		t.Errorf("reading the question allocates %v times, want at most %d", got, decodeFieldsAllocs)
	}
}
