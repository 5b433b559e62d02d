package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/doccmd"
)

// TestDocsCommandsParse: every xcloak command the documents show runs a
// command that exists, with flags it defines, as its own flag set parses
// them; so does every flag their comments name. Only flags are parsed:
// with --help after them no command connects to anything or listens.
func TestDocsCommandsParse(t *testing.T) {
	// The documents' commands run from the repository's root, and name
	// files from there.
	t.Chdir(repoRoot)
	// No command acts on a check, which stops it at --help; should one
	// ever get past it, it finds its context ended.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	parse := func(args []string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(ctx, append([]string{"xcloak"}, args...), nil, strings.NewReader(""), &stdout, &stderr)
		return stderr.String(), err
	}
	doccmd.CheckAll(t, ".", "xcloak", parse)
}

// TestDocsNameOnlySettings: every XCLOAK_ variable the documents name,
// in prose, tables or commands, is a setting, a setting's _FILE or a
// variable of the tests, as unknownSettings knows them, or one of the
// few names that are something else. README's Configuration table is
// held row by row by TestReadmeListsEverySetting; this holds the rest.
func TestDocsNameOnlySettings(t *testing.T) {
	// Not XCloak's settings, and said so where they are named.
	notSettings := map[string]string{
		"XCLOAK_LOCKOUT_THRESHHOLD": "the misspelt setting README warns of",
		"XCLOAK_API_KEY":            "an application's key for the decision API (client, examples/ownusers)",
		"XCLOAK_URL":                "XCloak's URL as examples/ownusers reads it",
		"XCLOAK_VERSION":            "docker compose's build argument for the release",
	}
	name := regexp.MustCompile(`\bXCLOAK_[A-Z0-9_]*[A-Z0-9]\b`)
	for _, glob := range doccmd.Files {
		paths, err := filepath.Glob(filepath.Join(repoRoot, glob))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range strings.Split(string(b), "\n") {
				for _, n := range name.FindAllString(line, -1) {
					if _, ok := notSettings[n]; ok {
						continue
					}
					if len(unknownSettings([]string{n + "="})) > 0 {
						t.Errorf("%s:%d: %s is no setting", path[len(repoRoot)+1:], i+1, n)
					}
				}
			}
		}
	}
}
