package main

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestReadBuildInfo(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/xcloak/xcloak", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-30T20:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	devel := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/xcloak/xcloak", Version: "(devel)"}}
	tests := []struct {
		name   string
		linked string
		info   *debug.BuildInfo
		want   buildInfo
	}{
		{"stamped", "", stamped, buildInfo{Version: "v1.2.3", Revision: "0123456789abcdef0123456789abcdef01234567",
			Time: "2026-11-30T20:00:00Z", Modified: true, GoVersion: "go1.26.8"}},
		{"linked version wins", "v2.0.0", stamped, buildInfo{Version: "v2.0.0", Revision: "0123456789abcdef0123456789abcdef01234567",
			Time: "2026-11-30T20:00:00Z", Modified: true, GoVersion: "go1.26.8"}},
		{"devel", "", devel, buildInfo{Version: "devel", Revision: "unknown", Time: "unknown", GoVersion: "go1.26.8"}},
		{"no build information", "", nil, buildInfo{Version: "devel", Revision: "unknown", Time: "unknown", GoVersion: runtime.Version()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := func() (*debug.BuildInfo, bool) { return tt.info, tt.info != nil }
			if got := readBuildInfo(tt.linked, read); got != tt.want {
				t.Errorf("readBuildInfo = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"xcloak", "version"}, nil, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	b := readBuildInfo(version, debug.ReadBuildInfo)
	for _, want := range []string{"version:   " + b.Version + "\n", "revision:  " + b.Revision + "\n", "time:      " + b.Time + "\n",
		"modified:  false\n", "go:        " + runtime.Version() + "\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout = %q, want %q", stdout.String(), want)
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr = %q, want nothing", stderr.String())
	}

	stdout.Reset()
	if err := run(t.Context(), []string{"xcloak", "version", "--help"}, nil, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout.String(), "usage: xcloak version") {
		t.Errorf("version --help: stdout = %q, want its usage", stdout.String())
	}
}

// TestBuildInfoMetric: /metrics and the log's "listening" line say which
// build answers.
func TestBuildInfoMetric(t *testing.T) {
	vars := storeSettings(t)
	vars["XCLOAK_METRICS_ADDR"] = "main"
	s := startServe(t, vars)
	_, body := fetch(t, s.base+"/metrics")
	b := readBuildInfo(version, debug.ReadBuildInfo)
	want := `xcloak_build_info{goversion="` + runtime.Version() + `",revision="` + b.Revision + `",version="` + b.Version + `"} 1`
	if !strings.Contains(body, want) {
		t.Errorf("/metrics has no %s", want)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if want := `"version":"` + b.Version + `","revision":"` + b.Revision + `"`; !strings.Contains(s.stderr.String(), want) {
		t.Errorf("the log has no %s:\n%s", want, s.stderr.String())
	}
}
