package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xcloak/xcloak/internal/cli"
)

// version is the release this binary is, when the build names it:
// go build -ldflags "-X main.version=v1.0.0". Empty, the module version
// Go stamps into the build is used, or "devel".
var version string

// buildInfo is what a binary knows of its own build.
type buildInfo struct {
	// Version is the release: the linked-in version, the module's, or "devel".
	Version string
	// Revision is the commit built, or "unknown" outside a checkout.
	Revision string
	// Time is the commit's time (RFC 3339), or "unknown".
	Time string
	// Modified reports that the checkout had changes not committed.
	Modified bool
	// GoVersion is the Go release that built the binary.
	GoVersion string
}

// readBuildInfo reads the build's information with read
// (debug.ReadBuildInfo); linked is the version given with -ldflags -X,
// which wins over the module's.
func readBuildInfo(linked string, read func() (*debug.BuildInfo, bool)) buildInfo {
	b := buildInfo{Version: linked, Revision: "unknown", Time: "unknown", GoVersion: runtime.Version()}
	info, ok := read()
	if ok {
		if info.GoVersion != "" {
			b.GoVersion = info.GoVersion
		}
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	return b
}

// printVersion prints the binary's build information.
func printVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("xcloak", "version", "",
		"Prints the version of this binary, the commit it was built from and\n"+
			"when, whether the checkout had changes not committed, and the Go\n"+
			"release that built it.\n")
	if err := cli.Parse(fs, args, stdout, stderr); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	b := readBuildInfo(version, debug.ReadBuildInfo)
	_, err := fmt.Fprintf(stdout, "version:   %s\nrevision:  %s\ntime:      %s\nmodified:  %t\ngo:        %s\n",
		b.Version, b.Revision, b.Time, b.Modified, b.GoVersion)
	return err
}

// buildInfoGauge is xcloak_build_info, always 1, whose labels say which
// build answers: a dashboard can tell replicas of different releases apart.
func buildInfoGauge(b buildInfo) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "xcloak_build_info",
		Help:        "Always 1; its labels are the version, VCS revision and Go release of this build.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion},
	})
	g.Set(1)
	return g
}
