package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/xcloak/xcloak/internal/doccmd"
)

// TestDocsCommandsParse: every stuffing command the documents show runs
// a subcommand that exists, with flags it defines and values they take,
// as its own flag set parses them; so does every flag their comments
// name.
func TestDocsCommandsParse(t *testing.T) {
	// The documents' commands run from the repository's root, and name
	// files from there.
	t.Chdir("../..")
	// No command acts on a check, which stops it at --help; should one
	// ever get past it, it finds its context ended.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	parse := func(args []string) (string, error) {
		var stdout, stderr bytes.Buffer
		err := run(ctx, append([]string{"stuffing"}, args...), &stdout, &stderr)
		return stderr.String(), err
	}
	doccmd.CheckAll(t, ".", "stuffing", parse)
}
