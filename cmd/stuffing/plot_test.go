package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlot(t *testing.T) {
	dir := t.TempDir()
	rows := []limiterRow{
		{Concurrency: 10, Limit: 10, BaselineAdmitted: 10, BaselineTrials: []int{10, 10}, XCloakAdmitted: 10, XCloakTrials: []int{10, 10}},
		{Concurrency: 100, Limit: 10, BaselineAdmitted: 97, BaselineTrials: []int{40, 97}, XCloakAdmitted: 10, XCloakTrials: []int{10, 10}},
		{Concurrency: 1000, Limit: 10, BaselineAdmitted: 990, BaselineTrials: []int{600, 990}, XCloakAdmitted: 10, XCloakTrials: []int{10, 10}},
		{Concurrency: 100, Limit: 50, BaselineAdmitted: 99, BaselineTrials: []int{99}, XCloakAdmitted: 50, XCloakTrials: []int{50}},
	}
	data, _ := json.Marshal(rows)
	in := filepath.Join(dir, "rows.json")
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "plot.svg")
	if _, stderr, err := runStuffing(t, "plot", "--in", "Redis <1>="+in, "--in", "Cluster="+in, "--out", out); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(strings.NewReader(string(svg)))
	elements := map[string]int{}
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG is not well-formed XML: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok {
			elements[se.Name.Local]++
		}
	}
	// Two runs x two limiters; only the limit-10 rows (3 points each).
	if got, want := elements["polyline"], 4; got != want {
		t.Errorf("%d polylines, want %d", got, want)
	}
	for _, want := range []string{"Redis &lt;1&gt;", "baseline, Cluster", "XCloak, Cluster", "the limit (10)", ">1000<"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestPlotRejectsOtherJSON(t *testing.T) {
	in := filepath.Join(t.TempDir(), "x.json")
	if err := os.WriteFile(in, []byte(`{"not":"rows"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runStuffing(t, "plot", "--in", "x="+in)
	if err == nil || !strings.Contains(stderr, "not the output of limiter --json") {
		t.Fatalf("got %v, stderr %q; want a clear refusal", err, stderr)
	}
}
