package doccmd_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/xcloak/xcloak/internal/doccmd"
)

const repoRoot = "../.."

// TestDocsGoTestNamesExist: every go test line of the documents names,
// with -run or -bench, tests or benchmarks its package has, as go test
// matches them: each alternative of the pattern's first element finds a
// function. A -run beside -bench only keeps the tests from running.
func TestDocsGoTestNamesExist(t *testing.T) {
	cmds, err := doccmd.Find(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cmds {
		w := c.Words
		if len(w) < 2 || w[0] != "go" || w[1] != "test" {
			continue
		}
		run, bench := flagValue(w, "run"), flagValue(w, "bench")
		if run == "" && bench == "" {
			continue
		}
		for _, pkg := range w[2:] {
			if !strings.HasPrefix(pkg, "./") || strings.HasSuffix(pkg, "...") {
				continue
			}
			n++
			names := testFuncs(t, filepath.Join(repoRoot, pkg))
			if len(names) == 0 {
				t.Errorf("%s\n\t%s has no tests", c, pkg)
				continue
			}
			check := func(pattern, prefix, kind string) {
				for _, alt := range alternatives(pattern) {
					re, err := regexp.Compile(alt)
					if err != nil {
						t.Errorf("%s\n\t%q: %v", c, alt, err)
						continue
					}
					if !slices.ContainsFunc(names, func(name string) bool { return strings.HasPrefix(name, prefix) && re.MatchString(name) }) {
						t.Errorf("%s\n\tno %s of %s matches %q", c, kind, pkg, alt)
					}
				}
			}
			if bench != "" {
				check(bench, "Benchmark", "benchmark")
			} else {
				check(run, "", "test")
			}
		}
	}
	if n == 0 {
		t.Fatal("the documents show no go test line that names a test or benchmark")
	}
}

// TestDocsMakeTargetsExist: every make target the documents name is one
// of the Makefile's.
func TestDocsMakeTargetsExist(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := make(map[string]bool)
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z0-9_.-]+):`).FindAllStringSubmatch(string(makefile), -1) {
		targets[m[1]] = true
	}
	cmds, err := doccmd.Find(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cmds {
		if c.Words[0] != "make" {
			continue
		}
		for _, target := range c.Words[1:] {
			if strings.HasPrefix(target, "-") || strings.Contains(target, "=") {
				continue
			}
			n++
			if !targets[target] {
				t.Errorf("%s\n\tthe Makefile has no target %s", c, target)
			}
		}
	}
	if n == 0 {
		t.Fatal("the documents name no make target")
	}
}

// flagValue returns the value of go test's flag name in words, given as
// -name value or -name=value, or "".
func flagValue(words []string, name string) string {
	for i, w := range words {
		w = strings.TrimPrefix(w, "-")
		if w == "-"+name || w == name {
			if i+1 < len(words) {
				return words[i+1]
			}
		}
		if v, ok := strings.CutPrefix(w, name+"="); ok {
			return v
		}
		if v, ok := strings.CutPrefix(w, "-"+name+"="); ok {
			return v
		}
	}
	return ""
}

// alternatives returns the patterns a document means by pattern: go
// test splits it at slashes and matches the first element against the
// top-level functions, and each alternative of a|b names functions the
// document expects. A pattern of nothing (^$) names none.
func alternatives(pattern string) []string {
	first, _, _ := strings.Cut(pattern, "/")
	if first == "^$" || first == "" {
		return nil
	}
	if strings.ContainsAny(first, "()") {
		return []string{first}
	}
	return strings.Split(first, "|")
}

var testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Example|Fuzz)\w*)\(`)

// testFuncs returns the test, benchmark, example and fuzz functions of
// the package in dir.
func testFuncs(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range testFunc.FindAllSubmatch(b, -1) {
			names = append(names, string(m[1]))
		}
	}
	return names
}
