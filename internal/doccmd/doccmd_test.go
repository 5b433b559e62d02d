package doccmd

import (
	"slices"
	"strings"
	"testing"
)

func TestParseMarkdown(t *testing.T) {
	doc := strings.Join([]string{
		"Run `xcloak user add|unlock --email ADDRESS` or `make run`.",
		"```sh",
		`export XCLOAK_SECRET="$(openssl rand -hex 32)"`,
		`printf '%s\n' "$PASSWORD" | xcloak user add --email ann@example.com --admin`,
		`U="--target http://127.0.0.1:8080 --json"`,
		`go run ./cmd/stuffing http $U \`,
		`  --legit-password "$P" > out.json 2>&1 &   # the flood`,
		`                                            # (--before URL: another)`,
		`XCLOAK_ADDR=127.0.0.1:18080 bin/xcloak serve && bin/xcloak-before serve`,
		`go test -run '^$' -bench 'A|B' ./ratelimit/`,
		`xcloak user list [--search PREFIX] [--limit N | --all] ...`,
		"docker compose exec -T xcloak /xcloak healthcheck",
		"```",
		"```text",
		"xcloak serve --not-a-command",
		"```",
	}, "\n")
	type want struct {
		line    int
		words   string
		comment string
	}
	wants := []want{
		{1, "xcloak user add --email ADDRESS", ""},
		{1, "xcloak user unlock --email ADDRESS", ""},
		{1, "make run", ""},
		{3, "export XCLOAK_SECRET=$(openssl rand -hex 32)", ""},
		{4, `printf %s\n $PASSWORD`, ""},
		{4, "xcloak user add --email ann@example.com --admin", ""},
		{6, "go run ./cmd/stuffing http --target http://127.0.0.1:8080 --json --legit-password $P", "the flood (--before URL: another)"},
		{9, "bin/xcloak serve", ""},
		{9, "bin/xcloak-before serve", ""},
		{10, "go test -run ^$ -bench A|B ./ratelimit/", ""},
		{11, "xcloak user list --search PREFIX --limit N --all", ""},
		{12, "docker compose exec -T xcloak /xcloak healthcheck", ""},
	}
	got := parseMarkdown(strings.Split(doc, "\n"), "doc.md")
	var gotW []want
	for _, c := range got {
		gotW = append(gotW, want{c.Line, strings.Join(c.Words, " "), c.Comment})
	}
	if !slices.Equal(gotW, wants) {
		t.Errorf("parseMarkdown =\n%+v\nwant\n%+v", gotW, wants)
	}

	args := func(c Command, program string) string {
		a, ok := c.Args(program)
		if !ok {
			return "-"
		}
		return strings.Join(a, " ")
	}
	for i, want := range []string{
		"user add --email ADDRESS", "user unlock --email ADDRESS", "-", "-", "-", "user add --email ann@example.com --admin",
		"-", "serve", "-", "-", "user list --search PREFIX --limit N --all", "healthcheck",
	} {
		if i >= len(got) {
			break
		}
		if g := args(got[i], "xcloak"); g != want {
			t.Errorf("%s: Args(xcloak) = %q, want %q", got[i], g, want)
		}
	}
	if len(got) > 6 {
		if g := got[6].CommentFlags(); !slices.Equal(g, []string{"before"}) {
			t.Errorf("CommentFlags = %q, want [before]", g)
		}
	}
}
