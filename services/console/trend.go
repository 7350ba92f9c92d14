package console

import (
	"context"
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/api"
)

// Bounds of the Groups page's trend.
const (
	// trendHours is the trend's span, one bucket per hour.
	trendHours = 24
	// trendPages bounds the audit.list pages (of api.MaxLimit chains) the
	// trend reads: the newest trendPages×1000 chains of the span.
	trendPages = 5
)

// trendKey names a group (Party "" and top true for a top-level group).
type trendKey struct {
	Domain, Code, Class, Party string
	Top                        bool
}

// trends are the groups' counts per hour over the last trendHours.
type trends struct {
	Start  time.Time
	byKey  map[trendKey]*[trendHours]int
	Capped bool
}

// loadTrends counts the chains quarantined in each of the last
// trendHours hours, per group and per group and party, from audit.list
// (audit.groups carries no times but the first and last): at most
// trendPages pages, newest first; Capped says more chains matched.
func (p *recordPages) loadTrends(ctx context.Context, s *session, domain string, now time.Time) (*trends, error) {
	end := now.UTC().Truncate(time.Hour).Add(time.Hour)
	t := &trends{Start: end.Add(-trendHours * time.Hour), byKey: map[trendKey]*[trendHours]int{}}
	req := api.ListRequest{Domain: domain, From: t.Start, Limit: api.MaxLimit}
	for page := 0; ; page++ {
		if page == trendPages {
			t.Capped = true
			break
		}
		rep, err := call[api.ListRequest, api.ListReply](ctx, p.rq, s, api.AuditList, req)
		if err != nil {
			return nil, err
		}
		for _, it := range rep.Items {
			h := int(it.QuarantinedAt.Sub(t.Start) / time.Hour)
			if h < 0 || h >= trendHours {
				continue
			}
			for _, k := range []trendKey{{it.Domain, it.ErrorCode, it.Class, "", true}, {it.Domain, it.ErrorCode, it.Class, it.PartyID, false}} {
				b := t.byKey[k]
				if b == nil {
					b = &[trendHours]int{}
					t.byKey[k] = b
				}
				b[h]++
			}
		}
		if rep.NextCursor == "" {
			break
		}
		req.Cursor = rep.NextCursor
	}
	return t, nil
}

// Of is the sparkline of a group (a party's when g.Party is set or the
// group is a second-level one).
func (t *trends) Of(g api.Group, top bool) sparkline {
	if t == nil {
		return sparkline{}
	}
	s := sparkline{Start: t.Start, Capped: t.Capped, OK: true}
	if b := t.byKey[trendKey{g.Domain, g.Code, g.Class, g.Party, top}]; b != nil {
		s.Counts = b[:]
	} else {
		s.Counts = make([]int, trendHours)
	}
	return s
}

// sparkline is one group's counts per hour, oldest first.
type sparkline struct {
	Start  time.Time
	Counts []int
	Capped bool
	OK     bool
}

// Total is the count over the span.
func (s sparkline) Total() int {
	n := 0
	for _, v := range s.Counts {
		n += v
	}
	return n
}

// Text is the sparkline's text alternative.
func (s sparkline) Text() string {
	peak, at := 0, 0
	for i, v := range s.Counts {
		if v > peak {
			peak, at = v, i
		}
	}
	parts := make([]string, len(s.Counts))
	for i, v := range s.Counts {
		parts[i] = strconv.Itoa(v)
	}
	txt := fmt.Sprintf("%d in the last %d h", s.Total(), len(s.Counts))
	if peak > 0 {
		txt += fmt.Sprintf(", peak %d in the hour from %s UTC", peak, s.Start.Add(time.Duration(at)*time.Hour).Format("15:04"))
	}
	txt += "; per hour, oldest first: " + strings.Join(parts, " ")
	if s.Capped {
		txt += " (counted over the newest chains only)"
	}
	return txt
}

// SVG draws the counts as a small inline line (numbers only).
func (s sparkline) SVG() template.HTML {
	if len(s.Counts) == 0 {
		return ""
	}
	peak := 1
	for _, v := range s.Counts {
		peak = max(peak, v)
	}
	const w, h = 96.0, 24.0
	var b strings.Builder
	for i, v := range s.Counts {
		fmt.Fprintf(&b, "%.1f,%.1f ", float64(i)/float64(len(s.Counts)-1)*w, h-1-float64(v)/float64(peak)*(h-2))
	}
	return template.HTML(fmt.Sprintf(`<svg class="spark" viewBox="0 0 %.0f %.0f" preserveAspectRatio="none" aria-hidden="true" focusable="false"><polyline points="%s"/></svg>`,
		w, h, strings.TrimSpace(b.String())))
}
