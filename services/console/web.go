package console

import (
	"log/slog"
	"time"
)

// web is what every part of the console shares, and all a part holds
// besides its own state: the page renderer, the log, the requester that
// calls the services as the person, and the clock.
type web struct {
	*renderer
	log *slog.Logger
	rq  requester
	now func() time.Time
}

// renderer executes the embedded page templates.
type renderer struct {
	pages *pages
	log   *slog.Logger
}

// requester calls the services on a person's connection (call, callRaw),
// each call bounded by timeout.
type requester struct {
	timeout time.Duration
}
