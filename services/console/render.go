package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
	"github.com/deadletter/deadletter/shared/approval"
)

// assets are the embedded templates and static files.
//
//go:embed templates/*.html static
var assets embed.FS

// pageNames are the templates of full pages (each with the layout).
var pageNames = []string{"draft", "login", "overview", "groups", "records", "record", "drains", "plan", "drain", "audit", "approvals", "approval", "holds", "passkeys", "policy"}

// pages are the parsed templates by page name.
type pages struct {
	byName map[string]*template.Template
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	// ts is a time kept whole: UTC, to the second, in a <time> that
	// does not wrap (console.css); a table short of room (the Records
	// list) may set it on two lines, the date above the time, never
	// breaking either.
	"ts": func(t time.Time) template.HTML {
		if t.IsZero() {
			return "—"
		}
		u := t.UTC()
		return template.HTML(`<time class="ts" datetime="` + u.Format(time.RFC3339Nano) + `"><span class="ts-d">` + u.Format("2006-01-02") +
			`</span> <span class="ts-t">` + u.Format("15:04:05Z") + `</span></time>`)
	},
	// breakable is a whole id that may wrap after its underscores and
	// hyphens (a dlq id after its domain, an approval id at its parts):
	// no character is added, a copy gives the id as it is.
	"breakable": func(id string) template.HTML {
		var b strings.Builder
		for _, r := range id {
			b.WriteString(template.HTMLEscapeString(string(r)))
			if r == '_' || r == '-' {
				b.WriteString("<wbr>")
			}
		}
		return template.HTML(b.String())
	},
	"label":          identLabel,
	"drainURL":       drainURL,
	"drainStatus":    drainStatus,
	"inFlight":       inFlight,
	"ago":            func(t time.Time) string { return age(time.Since(t).Seconds()) },
	"age":            age,
	"join":           strings.Join,
	"short":          func(s string) string { return shortHash(s) },
	"records":        recordsURL,
	"inc":            func(i int) int { return i + 1 },
	"guard":          guardText,
	"guardWords":     guardWords,
	"outcomeWords":   outcomeWords,
	"approvalWords":  approvalStatusWords,
	"pct":            func(f float64) float64 { return f * 100 },
	"noticeApproval": noticeApproval,
	"thousands":      thousands,
	"add":            func(a, b int) int { return a + b },
}

// age renders seconds as a short duration ("3m", "2h5m", "4d").
func age(sec float64) string {
	if sec <= 0 || math.IsNaN(sec) {
		return "—"
	}
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func shortHash(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}

// recordsURL links to the records page filtered by name/value pairs.
func recordsURL(pairs ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			q.Set(pairs[i], pairs[i+1])
		}
	}
	if len(q) == 0 {
		return "/records"
	}
	return "/records?" + q.Encode()
}

func urlEscape(s string) string { return url.QueryEscape(s) }

func parsePages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		p.byName[name] = t
	}
	return p, nil
}

// view is what every page template gets.
type view struct {
	// Title names the page; Nav the menu entry it belongs to.
	Title, Nav string
	// Wide: the page takes the window's width (a table of many columns,
	// the Records list), not the reading width of the others.
	Wide bool
	// User and Role are the logged-in person ("" on the login page).
	User, Role string
	// CSRF is the token of the page's forms.
	CSRF string
	// Allowed are the endpoint subjects the person's role imports
	// (package access): what the page offers.
	Allowed map[string]bool
	// ReadsPayloads: the role may reveal payloads.
	ReadsPayloads bool
	// Error is a message to show; APIError a service's coded refusal.
	Error    string
	APIError *api.Error
	// Notice is a success message.
	Notice string
	// Next is where the login goes after success.
	Next string
	// Data is the page's own data.
	Data any
}

// newView returns the view of a page for s.
func newView(s *session, title, nav string, data any) *view {
	allowed := map[string]bool{}
	for _, sub := range access.RoleEndpoints(access.Role(s.role)) {
		allowed[sub] = true
	}
	return &view{Title: title, Nav: nav, User: s.user, Role: s.role, CSRF: s.csrf, Allowed: allowed, ReadsPayloads: s.readsPayloads, Data: data}
}

// setErr shows err on the page: a service's coded error as it is, other
// errors as UNAVAILABLE (no responder, a timeout).
func (v *view) setErr(err error) {
	if err == nil {
		return
	}
	if e := api.AsError(err); e != nil {
		v.APIError = e
		return
	}
	v.APIError = &api.Error{Code: api.ErrUnavailable, Message: "the service did not answer; retry"}
}

// statusOf is the HTTP status of a page that shows err.
func statusOf(err error) int {
	switch api.CodeOf(err) {
	case "":
		if err == nil {
			return http.StatusOK
		}
		return http.StatusBadGateway
	case api.ErrForbidden, api.ErrUnauthenticated:
		return http.StatusForbidden
	case api.ErrNotFound:
		return http.StatusNotFound
	case api.ErrBadRequest:
		return http.StatusBadRequest
	case api.ErrConflict, api.ErrInvalidTransition, api.ErrNotRedrivable, api.ErrPoisoned, api.ErrTooManyDrains,
		api.ErrHeld, api.ErrNotPlaced, api.ErrAlreadyDecided, api.ErrExpired, approval.CodeCorrectionPending:
		return http.StatusConflict
	case api.ErrSelfApproval, api.ErrReauthFailed, api.ErrDecisionUnsigned:
		return http.StatusForbidden
	}
	return http.StatusBadGateway
}

// securityHeaders are set on every response: no framing, no sniffing, a
// policy that allows only the console's own scripts and styles.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// render executes page name with v.
func (rd *renderer) render(w http.ResponseWriter, r *http.Request, status int, name string, v *view) {
	if f, ok := r.Context().Value(flashKey{}).(string); ok && v.Notice == "" {
		v.Notice = f
	}
	t := rd.pages.byName[name]
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "layout", v); err != nil {
		rd.log.Error("render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// fragment executes the named template of page into a string.
func (rd *renderer) fragment(page, name string, data any) (string, error) {
	var b bytes.Buffer
	if err := rd.pages.byName[page].ExecuteTemplate(&b, name, data); err != nil {
		return "", err
	}
	return b.String(), nil
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// errText renders an error for a page section.
func errText(err error) string {
	if e := api.AsError(err); e != nil {
		return e.Code + ": " + e.Message
	}
	return api.ErrUnavailable + ": the service did not answer"
}
