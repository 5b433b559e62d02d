package dashboard_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/auth"
	"github.com/xcloak/xcloak/dashboard"
)

// authEventKinds reads every event kind package auth declares: the
// string constants named Event... of its non-test files.
func authEventKinds(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../auth/*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var kinds []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				for i, name := range v.Names {
					if !strings.HasPrefix(name.Name, "Event") || i >= len(v.Values) {
						continue
					}
					lit, ok := v.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					kinds = append(kinds, s)
				}
			}
		}
	}
	if len(kinds) < 40 {
		t.Fatalf("found %d event kinds in package auth, want them all: %v", len(kinds), kinds)
	}
	slices.Sort(kinds)
	return kinds
}

// TestSearchKindsAreEveryKind: the event search knows every kind package
// auth declares, each once, and no other, so that a new kind cannot be
// recorded and then not be found.
func TestSearchKindsAreEveryKind(t *testing.T) {
	want := authEventKinds(t)
	got := slices.Clone(dashboard.SearchKinds)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		var missing, extra []string
		for _, k := range want {
			if !slices.Contains(got, k) {
				missing = append(missing, k)
			}
		}
		for _, k := range got {
			if !slices.Contains(want, k) {
				extra = append(extra, k)
			}
		}
		t.Errorf("SearchKinds lacks %v and has %v besides package auth's kinds (or holds one twice)", missing, extra)
	}
}

// TestEventKindsListAdministratorsActs: the dashboard's latest events,
// which already list an administrator's unlock, sign-out everywhere and
// attack-mode switch, list every other act of account and key
// administration too, so that an account promoted to administrator or a
// key made shows where the security team looks first.
func TestEventKindsListAdministratorsActs(t *testing.T) {
	for _, kind := range []string{
		auth.EventUserCreated, auth.EventUserDisabled, auth.EventUserEnabled, auth.EventUserDeleted,
		auth.EventUserPromoted, auth.EventUserDemoted, auth.EventPasswordSet, auth.EventFactorRemoved,
		auth.EventAPIKeyCreated, auth.EventAPIKeyRevoked, auth.EventEventsExported,
		auth.EventUnlock, auth.EventSignedOutEverywhere, auth.EventAttackSwitched,
	} {
		if !slices.Contains(dashboard.EventKinds, kind) {
			t.Errorf("EventKinds lacks %s", kind)
		}
	}
}
