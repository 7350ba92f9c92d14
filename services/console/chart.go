package console

import (
	"fmt"
	"html/template"
	"strings"
	"sync"
	"time"

	"github.com/deadletter/deadletter/shared/api"
)

// Bounds of the drains' sampled history.
const (
	// chartPoints is the most samples a drain keeps (older ones are
	// thinned, every other one dropped, when it is reached).
	chartPoints = 240
	// chartDrains is the most drains with a history (the least recently
	// sampled is forgotten first).
	chartDrains = 64
)

// point is one sample of a drain's progress.
type point struct {
	At                time.Time
	Rate              float64
	Committed, Failed int
	Done, Selected    int
}

// history keeps a few samples of each drain the console shows, taken
// when a page or its event stream reads the drain's status: the drain
// state holds only its current rate and counters, so the console's chart
// starts when the console first showed the drain.
type history struct {
	mu     sync.Mutex
	drains map[string]*series
}

type series struct {
	points []point
	last   time.Time
}

// sample adds st's figures at now (at most one sample per 500 ms, or when
// a counter changed) and returns the drain's chart.
func (h *history) sample(st api.DrainState, now time.Time) chart {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.drains == nil {
		h.drains = map[string]*series{}
	}
	s := h.drains[st.DrainID]
	if s == nil {
		if len(h.drains) >= chartDrains {
			var oldest string
			for id, o := range h.drains {
				if oldest == "" || o.last.Before(h.drains[oldest].last) {
					oldest = id
				}
			}
			delete(h.drains, oldest)
		}
		s = &series{}
		h.drains[st.DrainID] = s
	}
	p := point{At: now, Rate: st.CurrentRate, Committed: st.Committed + st.SkippedDuplicate,
		Failed: st.ReplayFailed + st.Poisoned, Done: st.Done(), Selected: st.Selected}
	if n := len(s.points); n == 0 || now.Sub(s.points[n-1].At) >= 500*time.Millisecond ||
		p.Done != s.points[n-1].Done || p.Failed != s.points[n-1].Failed {
		s.points = append(s.points, p)
		if len(s.points) > chartPoints {
			kept := s.points[:0]
			for i, q := range s.points {
				if i%2 == 0 || i == len(s.points)-1 {
					kept = append(kept, q)
				}
			}
			s.points = kept
		}
	}
	s.last = now
	return chart{Points: append([]point(nil), s.points...)}
}

// chart is a drain's samples, drawn as an inline SVG (SVG) and listed as
// a table (Rows) for readers without the picture.
type chart struct {
	Points []point
}

// Chart geometry (SVG user units).
const (
	chartW, chartH = 600.0, 160.0
	chartPad       = 30.0
)

// SVG draws the replay rate (a line, left scale) and the committed and
// failed outcomes (lines, right scale: events) over time.
func (c chart) SVG() template.HTML {
	if len(c.Points) == 0 {
		return ""
	}
	t0 := c.Points[0].At
	span := c.Points[len(c.Points)-1].At.Sub(t0).Seconds()
	maxRate, maxN := 1.0, 1
	for _, p := range c.Points {
		maxRate = max(maxRate, p.Rate)
		maxN = max(maxN, p.Selected, p.Committed, p.Failed)
	}
	x := func(p point) float64 {
		if span <= 0 {
			return chartPad
		}
		return chartPad + p.At.Sub(t0).Seconds()/span*(chartW-2*chartPad)
	}
	y := func(v, top float64) float64 { return chartH - chartPad - v/top*(chartH-2*chartPad) }
	line := func(val func(point) float64, top float64) string {
		var b strings.Builder
		for _, p := range c.Points {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(p), y(val(p), top))
		}
		return strings.TrimSpace(b.String())
	}
	last := c.Points[len(c.Points)-1]
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" role="img" aria-labelledby="chart-title chart-desc" preserveAspectRatio="none">`, chartW, chartH)
	fmt.Fprintf(&b, `<title id="chart-title">Replay rate and outcomes since %s</title>`, t0.UTC().Format("15:04:05Z"))
	fmt.Fprintf(&b, `<desc id="chart-desc">Now %.1f replays per second (peak %.1f); %d committed, %d failed of %d selected. The table below lists the samples.</desc>`,
		last.Rate, maxRate, last.Committed, last.Failed, last.Selected)
	fmt.Fprintf(&b, `<line class="axis" x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f"/>`, chartPad, chartH-chartPad, chartW-chartPad, chartH-chartPad)
	fmt.Fprintf(&b, `<text class="label" x="2" y="%.0f">%.0f/s</text><text class="label" x="%.0f" y="%.0f" text-anchor="end">%d</text>`,
		chartPad-4, maxRate, chartW-2, chartPad-4, maxN)
	fmt.Fprintf(&b, `<polyline class="rate" points="%s"/>`, line(func(p point) float64 { return p.Rate }, maxRate))
	fmt.Fprintf(&b, `<polyline class="committed" points="%s"/>`, line(func(p point) float64 { return float64(p.Committed) }, float64(maxN)))
	fmt.Fprintf(&b, `<polyline class="failed" points="%s"/>`, line(func(p point) float64 { return float64(p.Failed) }, float64(maxN)))
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // numbers and fixed text only
}

// Rows are the samples for the table, newest first, at most 20.
func (c chart) Rows() []point {
	out := make([]point, 0, min(len(c.Points), 20))
	for i := len(c.Points) - 1; i >= 0 && len(out) < 20; i-- {
		out = append(out, c.Points[i])
	}
	return out
}
