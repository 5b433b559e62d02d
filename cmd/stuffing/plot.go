package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/xcloak/xcloak/internal/cli"
)

const plotDescription = `Draws the output of "stuffing limiter --json" as an SVG: admitted requests
against concurrency, both on log scales, for the baseline and for XCloak,
with the limit as a line. Each --in adds one run, such as one Redis and one
Redis Cluster; a point is the run's worst trial and its bar spans the
trials.
`

// labelledFile is one --in: a run's label and its JSON file.
type labelledFile struct{ label, path string }

type plotInputs []labelledFile

func (p *plotInputs) String() string {
	var s []string
	for _, f := range *p {
		s = append(s, f.label+"="+f.path)
	}
	return strings.Join(s, " ")
}

func (p *plotInputs) Set(v string) error {
	label, path, ok := strings.Cut(v, "=")
	if !ok || label == "" || path == "" {
		return errors.New(`want LABEL=FILE, e.g. "Redis=redis.json"`)
	}
	*p = append(*p, labelledFile{label, path})
	return nil
}

func plotCommand(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("stuffing", "plot", "--in LABEL=FILE [--in LABEL=FILE] [flags]", plotDescription)
	var ins plotInputs
	fs.Var(&ins, "in", "`LABEL=FILE`: a run's label and its \"limiter --json\" output; repeat for several runs")
	out := fs.String("out", "-", "`file` to write the SVG to; - is stdout")
	limit := fs.Int("limit", 0, "plot the rows of this `limit` only; 0 takes the first row's")
	if err := cli.Parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if len(ins) == 0 {
		return badFlag(stderr, "give at least one --in LABEL=FILE")
	}
	var runs []plotRun
	for _, in := range ins {
		data, err := os.ReadFile(in.path)
		if err != nil {
			return err
		}
		var rows []limiterRow
		if err := json.Unmarshal(data, &rows); err != nil {
			return fmt.Errorf("%s: not the output of limiter --json: %w", in.path, err)
		}
		if *limit == 0 && len(rows) > 0 {
			*limit = rows[0].Limit
		}
		rows = slices.DeleteFunc(rows, func(r limiterRow) bool {
			return r.Limit != *limit || len(r.BaselineTrials) == 0 || len(r.XCloakTrials) == 0
		})
		if len(rows) == 0 {
			return fmt.Errorf("%s: no rows with limit %d", in.path, *limit)
		}
		slices.SortFunc(rows, func(a, b limiterRow) int { return a.Concurrency - b.Concurrency })
		runs = append(runs, plotRun{label: in.label, rows: rows})
	}
	svg := drawSVG(runs, *limit)
	if *out == "-" {
		_, err := stdout.Write(svg)
		return err
	}
	return os.WriteFile(*out, svg, 0o644)
}

// plotRun is one labelled set of rows.
type plotRun struct {
	label string
	rows  []limiterRow
}

// Geometry of the chart, in SVG user units. The legend's width follows
// its longest label.
const (
	plotH                     = 470
	innerW                    = 460
	marginL, marginT, marginB = 70, 50, 60
	charW                     = 7 // a generous width of one 12px character
)

// drawSVG renders the chart. Both axes are logarithmic, so a 2x
// over-admission looks the same at every scale.
func drawSVG(runs []plotRun, limit int) []byte {
	minC, maxC, maxY := math.MaxInt, 1, limit
	for _, r := range runs {
		for _, row := range r.rows {
			minC, maxC = min(minC, row.Concurrency), max(maxC, row.Concurrency)
			maxY = max(maxY, slices.Max(row.BaselineTrials), slices.Max(row.XCloakTrials))
		}
	}
	longest := len("the limit (100000)")
	for _, r := range runs {
		longest = max(longest, len("baseline, ")+len(r.label))
	}
	marginR := 16 + 38 + charW*longest + 10
	plotW := marginL + innerW + marginR
	x0, x1 := math.Log10(float64(minC))-0.15, math.Log10(float64(maxC))+0.15
	// A little headroom above the highest point, and ticks up to it.
	y0, y1 := 0.0, math.Log10(float64(maxY))+0.1
	iw, ih := float64(plotW-marginL-marginR), float64(plotH-marginT-marginB)
	px := func(v int) float64 { return marginL + (math.Log10(float64(v))-x0)/(x1-x0)*iw }
	py := func(v int) float64 {
		return marginT + ih - (math.Log10(float64(max(v, 1)))-y0)/(y1-y0)*ih
	}

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", plotW, plotH)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">Admitted requests per burst, limit %d (worst of the trials)</text>`+"\n", marginL, limit)

	// Grid and ticks: decades on y, the measured concurrency levels on x.
	for e := int(y0); e <= int(math.Floor(y1)); e++ {
		v := int(math.Pow10(e))
		y := py(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", marginL, y, marginL+iw, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%d</text>`+"\n", marginL-8, y+4, v)
	}
	var levels []int
	for _, r := range runs {
		for _, row := range r.rows {
			levels = append(levels, row.Concurrency)
		}
	}
	slices.Sort(levels)
	for _, c := range slices.Compact(levels) {
		x := px(c)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x, marginT, x, marginT+ih)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x, marginT+ih+18, c)
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none" stroke="#444"/>`+"\n", marginL, marginT, iw, ih)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">concurrent requests (log scale)</text>`+"\n", marginL+iw/2, plotH-18)
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">admitted (log scale)</text>`+"\n", marginT+ih/2)

	// The limit.
	ly := py(limit)
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#2ca02c" stroke-width="2" stroke-dasharray="6 4"/>`+"\n", marginL, ly, marginL+iw, ly)

	type series struct {
		name   string
		color  string
		dash   string
		trials func(limiterRow) []int
		worst  func(limiterRow) int
	}
	dashes := []string{"", "8 4", "2 3"}
	var legend []string
	legendItem := func(color, dash, marker, name string) {
		y := marginT + 10 + 22*len(legend)
		x := plotW - marginR + 16
		item := fmt.Sprintf(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`, x, y, x+30, y, color, dashAttr(dash))
		if marker != "" {
			item += markerSVG(marker, float64(x+15), float64(y), color)
		}
		item += fmt.Sprintf(`<text x="%d" y="%d">%s</text>`, x+38, y+4, escape(name))
		legend = append(legend, item)
	}
	markers := []string{"circle", "square", "triangle"}
	for i, r := range runs {
		dash, marker := dashes[i%len(dashes)], markers[i%len(markers)]
		// Runs' bars sit side by side rather than on top of each other.
		shift := 5 * (float64(i) - float64(len(runs)-1)/2)
		for _, s := range []series{
			{"baseline", "#d62728", dash, func(r limiterRow) []int { return r.BaselineTrials }, func(r limiterRow) int { return r.BaselineAdmitted }},
			{"XCloak", "#1f77b4", dash, func(r limiterRow) []int { return r.XCloakTrials }, func(r limiterRow) int { return r.XCloakAdmitted }},
		} {
			var pts []string
			for _, row := range r.rows {
				x := px(row.Concurrency) + shift
				lo, hi := slices.Min(s.trials(row)), slices.Max(s.trials(row))
				fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" opacity="0.6"/>`+"\n", x, py(lo), x, py(hi), s.color)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, py(s.worst(row))))
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.color, dashAttr(s.dash))
			for _, row := range r.rows {
				b.WriteString(markerSVG(marker, px(row.Concurrency)+shift, py(s.worst(row)), s.color) + "\n")
			}
			legendItem(s.color, s.dash, marker, s.name+", "+r.label)
		}
	}
	legendItem("#2ca02c", "6 4", "", fmt.Sprintf("the limit (%d)", limit))
	for _, item := range legend {
		b.WriteString(item + "\n")
	}
	note := marginT + 10 + 22*len(legend) + 8
	for i, line := range []string{"Points: the worst trial.", "Bars: every trial, min to max."} {
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">%s</text>`+"\n", plotW-marginR+16, note+16*i, line)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func dashAttr(dash string) string {
	if dash == "" {
		return ""
	}
	return fmt.Sprintf(` stroke-dasharray="%s"`, dash)
}

func markerSVG(kind string, x, y float64, color string) string {
	switch kind {
	case "square":
		return fmt.Sprintf(`<rect x="%.1f" y="%.1f" width="8" height="8" fill="%s"/>`, x-4, y-4, color)
	case "triangle":
		return fmt.Sprintf(`<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s"/>`, x, y-5, x-5, y+4, x+5, y+4, color)
	default:
		return fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`, x, y, color)
	}
}

func escape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
