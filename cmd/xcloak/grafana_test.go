package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// dashboardFile is deploy/'s Grafana dashboard.
var dashboardFile = filepath.Join(repoRoot, "deploy", "grafana", "xcloak.json")

type grafanaDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaPanel struct {
	ID         int                `json:"id"`
	Type       string             `json:"type"`
	Title      string             `json:"title"`
	Datasource *grafanaDatasource `json:"datasource"`
	Targets    []struct {
		Datasource *grafanaDatasource `json:"datasource"`
		Expr       string             `json:"expr"`
		RefID      string             `json:"refId"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's
}

type grafanaDashboard struct {
	UID           string         `json:"uid"`
	Title         string         `json:"title"`
	SchemaVersion int            `json:"schemaVersion"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query string `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// TestDashboardUsesExportedMetrics: every query of the board selects
// metrics XCloak exports, through the Prometheus chosen in its datasource
// variable.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q, title %q: want both", d.UID, d.Title)
	}
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion = %d, want 36 or later (datasources by uid)", d.SchemaVersion)
	}
	dsVar := ""
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Query == "prometheus" {
			dsVar = "${" + v.Name + "}"
		}
	}
	if dsVar == "" {
		t.Fatalf("templating has no Prometheus datasource variable: %+v", d.Templating.List)
	}

	exported := exportedMetrics(t)
	ids := make(map[int]string)
	queries := 0
	var check func(panels []grafanaPanel)
	check = func(panels []grafanaPanel) {
		for _, p := range panels {
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if other, dup := ids[p.ID]; dup {
				t.Errorf("%s has the id of panel %q", where, other)
			}
			ids[p.ID] = p.Title
			check(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s has no query", where)
			}
			for _, q := range p.Targets {
				ds := q.Datasource
				if ds == nil {
					ds = p.Datasource
				}
				if ds == nil || ds.Type != "prometheus" || ds.UID != dsVar {
					t.Errorf("%s query %s: datasource %+v, want the variable %s", where, q.RefID, ds, dsVar)
				}
				checkMetricNames(t, where+" query "+q.RefID, q.Expr, exported)
				queries++
			}
		}
	}
	check(d.Panels)
	if queries == 0 {
		t.Error("the dashboard has no query")
	}
}
