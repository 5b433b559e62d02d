package main

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// alertsFile holds deploy/'s Prometheus alert rules; alertsTestFile, their
// unit tests for promtool.
var (
	alertsFile     = filepath.Join(repoRoot, "deploy", "prometheus", "alerts.yml")
	alertsTestFile = filepath.Join(repoRoot, "deploy", "prometheus", "alerts_test.yml")
)

// The alerts the operator's pager needs, each on a metric XCloak exports
// today.
var wantAlerts = []string{
	"XCloakDegraded", "XCloakAttackInProgress", "XCloakRejectionsSpiking", "XCloakHashingSaturated",
	"XCloakSecurityEventsDropped", "XCloakMailsDropped", "XCloakWebhooksDropped", "XCloakWebhooksFailing",
	"XCloakBreachedLookupsFailing", "XCloakPostgresErrors", "XCloakDown",
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// readAlertRules reads alerts.yml.
func readAlertRules(t *testing.T) ruleFile {
	t.Helper()
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules ruleFile
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	return rules
}

func TestAlertRulesUseExportedMetrics(t *testing.T) {
	rules := readAlertRules(t)
	exported := exportedMetrics(t)
	found := make(map[string]bool)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: rule %q is no alert", g.Name, r.Record)
				continue
			}
			found[r.Alert] = true
			// up is Prometheus' own, of every scrape.
			checkMetricNames(t, "alert "+r.Alert, r.Expr, withUp(exported))
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: want a summary and a description", r.Alert)
			}
		}
	}
	for _, name := range wantAlerts {
		if !found[name] {
			t.Errorf("%s has no alert %s", alertsFile, name)
		}
	}
}

// TestAlertsDocumentedAndTested: every alert of alerts.yml has its row in
// DEPLOY.md's table of alerts and a unit test in alerts_test.yml, so that
// neither falls behind the rules.
func TestAlertsDocumentedAndTested(t *testing.T) {
	rules := readAlertRules(t)
	deploy, err := os.ReadFile(filepath.Join(repoRoot, "docs", "DEPLOY.md"))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(alertsTestFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !strings.Contains(string(deploy), "\n| `"+r.Alert+"` |") {
				t.Errorf("docs/DEPLOY.md's table of alerts has no row for %s", r.Alert)
			}
			if !strings.Contains(string(tests), "alertname: "+r.Alert+"\n") {
				t.Errorf("%s has no test of %s", alertsTestFile, r.Alert)
			}
		}
	}
}

// TestAlertRulesPromtool checks the rules as Prometheus loads them and runs
// their unit tests. scripts/promtool.sh (make test) installs promtool.
func TestAlertRulesPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (scripts/promtool.sh installs it): the alert rules are not checked")
	}
	for _, args := range [][]string{
		{"check", "rules", alertsFile},
		{"test", "rules", alertsTestFile},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		}
	}
}

// withUp is exported with Prometheus' up, which every scrape records.
func withUp(exported map[string]bool) map[string]bool {
	m := maps.Clone(exported)
	m["up"] = true
	return m
}
