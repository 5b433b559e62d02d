package main

import (
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// newRegistry is the registry /metrics serves, with the Go runtime's and the
// process's metrics and xcloak_build_info; openBackend registers the service's. The checks of
// deploy/'s alert rules and dashboard build it this way too, so that they
// see every metric serve exports.
func newRegistry() *prometheus.Registry {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildInfoGauge(readBuildInfo(version, debug.ReadBuildInfo)))
	return registry
}
