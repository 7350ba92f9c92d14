package console

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/shared/api"
)

// TestLineDiff: the diff of a correction marks its changed lines only.
func TestLineDiff(t *testing.T) {
	for _, tc := range []struct {
		name, a, b string
		want       string
		changed    bool
	}{
		{"same", "{\n  \"a\": 1\n}", "{\n  \"a\": 1\n}", "  {|  \"a\": 1|  }", false},
		{"changed line", "{\n  \"a\": 1,\n  \"b\": 2\n}", "{\n  \"a\": 3,\n  \"b\": 2\n}", "  {|- \"a\": 1,|+ \"a\": 3,|  \"b\": 2|  }", true},
		{"added line", "{\n}", "{\n  \"c\": true\n}", "  {|+ \"c\": true|  }", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, changed := lineDiff(tc.a, tc.b)
			var got []string
			for _, l := range lines {
				got = append(got, l.Op+" "+strings.TrimPrefix(l.Text, "  "))
			}
			if g := strings.Join(got, "|"); g != tc.want || changed != tc.changed {
				t.Errorf("diff %q (changed %v), want %q (%v)", g, changed, tc.want, tc.changed)
			}
		})
	}
}

// TestDrainFormRequest: the wizard's guard and ramp fields become the
// drain.start request; malformed ones name their field.
func TestDrainFormRequest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		form  url.Values
		field string
		check func(api.DrainStartRequest) bool
	}{
		{"guard and ramp", url.Values{"canary": {"5"}, "max_failure_rate": {"0.2"}, "pause_window": {"50"}, "ramp": {"1, 5,20"}, "ramp_hold": {"2.5"}}, "",
			func(r api.DrainStartRequest) bool {
				return r.Canary == 5 && r.MaxFailureRate != nil && *r.MaxFailureRate == 0.2 && r.PauseWindow == 50 &&
					len(r.Ramp) == 3 && r.Ramp[2] == 20 && r.RampHoldSeconds == 2.5
			}},
		{"no guard", url.Values{}, "", func(r api.DrainStartRequest) bool {
			on, _, _ := r.Guarded()
			return !on && r.Ramp == nil
		}},
		{"bad canary", url.Values{"canary": {"x"}}, "canary", nil},
		{"bad rate", url.Values{"max_failure_rate": {"lots"}}, "max_failure_rate", nil},
		{"bad ramp step", url.Values{"ramp": {"1,y"}}, "ramp[1]", nil},
		{"bad hold", url.Values{"ramp_hold": {"soon"}}, "ramp_hold_seconds", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/drains/plan", strings.NewReader(tc.form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req, err := parseDrainForm(r).request(true)
			if tc.field != "" {
				if api.FieldOf(err) != tc.field {
					t.Fatalf("error %v, want field %s", err, tc.field)
				}
				return
			}
			if err != nil || !tc.check(req) {
				t.Fatalf("request %+v, %v", req, err)
			}
		})
	}
}

// TestSparkline: counts per hour, with a text alternative that says the
// total, the peak and every hour.
func TestSparkline(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tr := &trends{Start: start, byKey: map[trendKey]*[trendHours]int{}}
	g := api.Group{Domain: "pharmacy", Code: "SCHEMA_VIOLATION", Class: "validation"}
	b := &[trendHours]int{}
	b[3], b[23] = 4, 1
	tr.byKey[trendKey{g.Domain, g.Code, g.Class, "", true}] = b
	s := tr.Of(g, true)
	if s.Total() != 5 || !strings.Contains(s.Text(), "peak 4 in the hour from 03:00 UTC") || !strings.Contains(string(s.SVG()), "<polyline") {
		t.Errorf("sparkline %d %q", s.Total(), s.Text())
	}
	if other := tr.Of(g, false); other.Total() != 0 || len(other.Counts) != trendHours {
		t.Errorf("a group without records: %+v", other)
	}
}

// TestChartHistory: the drain's samples are kept bounded and drawn.
func TestChartHistory(t *testing.T) {
	var h history
	now := time.Now()
	var ch chart
	for i := range 3 * chartPoints {
		ch = h.sample(api.DrainState{DrainID: "d", CurrentRate: float64(i % 7), DrainCounts: api.DrainCounts{Selected: 1000, Committed: i}}, now.Add(time.Duration(i)*time.Second))
	}
	if n := len(ch.Points); n > chartPoints || n < chartPoints/2 {
		t.Errorf("%d points kept", n)
	}
	if svg := string(ch.SVG()); !strings.Contains(svg, `class="committed"`) || !strings.Contains(svg, "<title") {
		t.Errorf("chart %.200s", svg)
	}
	for i := range chartDrains + 5 {
		h.sample(api.DrainState{DrainID: string(rune('a' + i))}, now)
	}
	if len(h.drains) > chartDrains {
		t.Errorf("%d drains kept", len(h.drains))
	}
}
