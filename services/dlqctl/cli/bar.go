package cli

import (
	"fmt"
	"io"

	"github.com/schollz/progressbar/v3"

	"github.com/deadletter/deadletter/shared/api"
)

// barProgress is the live progress bar of a drain on a terminal: done/total,
// percentage, elapsed and ETA (schollz/progressbar), and the drain's own
// current_rate and outcome counts in the description. The bar's own rate
// is not shown: it measures the jumps of Set between polls (a drain
// resumed or followed late showed "0 ev/hr"), not the replays.
type barProgress struct {
	w       io.Writer
	bar     *progressbar.ProgressBar
	max     int
	stopped bool
}

func newBarProgress(w io.Writer, id string, termWidth int) *barProgress {
	width := 30
	if termWidth > 0 && termWidth < 100 {
		width = 15
	}
	bar := progressbar.NewOptions(-1,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(id+" selecting"),
		progressbar.OptionSetWidth(width),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionSetTheme(progressbar.Theme{
			Saucer: "█", SaucerPadding: "░", BarStart: "|", BarEnd: "|",
		}),
	)
	return &barProgress{w: w, bar: bar, max: -1}
}

func (p *barProgress) update(st api.DrainState) {
	if p.stopped {
		return
	}
	if st.Status != api.DrainSelecting && st.Selected != p.max {
		p.max = st.Selected
		p.bar.ChangeMax(max(st.Selected, 1))
	}
	p.bar.Describe(fmt.Sprintf("%s %s · replayed %d · skipped %d · failed %d · poisoned %d%s",
		st.Status, rateText(st.CurrentRate), st.Committed, st.SkippedDuplicate+st.Skipped, st.ReplayFailed, st.Poisoned, heldSuffix(st)))
	_ = p.bar.Set(st.Done())
}

// rateText renders a drain's current_rate (replays per second) for the
// bar: per second from 1/s, per minute below, "- ev/s" when nothing was
// replayed in the last seconds.
func rateText(perSecond float64) string {
	switch {
	case perSecond >= 1:
		return fmt.Sprintf("%.1f ev/s", perSecond)
	case perSecond > 0:
		return fmt.Sprintf("%.1f ev/min", perSecond*60)
	}
	return "- ev/s"
}

func heldSuffix(st api.DrainState) string {
	s := ""
	if st.Held > 0 {
		s += fmt.Sprintf(" · held %d", st.Held)
		if st.HeldByEarlier > 0 {
			s += fmt.Sprintf(" (%d by earlier events)", st.HeldByEarlier)
		}
	}
	if st.Pending > 0 {
		s += fmt.Sprintf(" · pending %d", st.Pending)
	}
	return s
}

func (p *barProgress) stop() {
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.bar.Exit()
	fmt.Fprintln(p.w)
}
