package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLayoutNamesEveryPackage holds README's Layout section and
// docs/ARCHITECTURE.md to the packages that exist: a package added, moved
// or removed without its line in both fails here.
func TestLayoutNamesEveryPackage(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	layout := section(string(readme), "## Layout\n")
	if layout == "" {
		t.Fatal("README.md has no Layout section")
	}
	arch, err := os.ReadFile("../../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range packageDirs(t, "../..") {
		if !strings.Contains(layout, "`"+dir+"/`") && !strings.Contains(layout, "`"+dir+"`") {
			t.Errorf("README's Layout does not name %s/", dir)
		}
		if dir == "e2e" || strings.HasPrefix(dir, "cmd/") {
			continue // commands and browser tests are not library packages
		}
		if !strings.Contains(string(arch), "`"+dir+"`") {
			t.Errorf("docs/ARCHITECTURE.md does not name %s", dir)
		}
	}
}

// section returns the text of the Markdown section that starts with
// heading, up to the next heading of the same level.
func section(doc, heading string) string {
	_, rest, ok := strings.Cut(doc, heading)
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// packageDirs lists the directories under root that hold Go files,
// relative to root, in slash form.
func packageDirs(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" || name == "driver") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !seen[rel] {
			seen[rel] = true
			dirs = append(dirs, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}
