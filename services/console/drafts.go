package console

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Drafts: a form posted after its session ended (the person typed a
// correction for longer than the idle timeout) is not lost and not
// answered with a bare 401. The console keeps what was typed (never a
// password or the old CSRF token), sends the person to log in, and then
// shows the form again with its content, to check and send again: nothing
// runs without a fresh, deliberate submit. A draft is kept only when the
// request carries the cookie of a session that ended by idleness (so it
// comes from the person's own browser: the cookie is SameSite=Strict), is
// given back only to that browser (its own cookie) and only to the same
// person after the login, once, within draftTTL.

// Draft limits.
const (
	// draftCookie names the browser's draft.
	draftCookie = "dl_draft"
	// draftTTL is how long a draft is kept.
	draftTTL = 30 * time.Minute
	// maxDrafts bounds the drafts kept (the least recently kept go first).
	maxDrafts = 100
	// maxDraftBytes bounds one draft (names and values together): a
	// larger form is refused as before.
	maxDraftBytes = 256 << 10
)

// draft is a form posted after its session ended.
type draft struct {
	user   string
	path   string
	fields []draftField
	at     time.Time
}

// draftField is one field of a draft, as typed.
type draftField struct {
	Name, Value string
	// fixed: the field names what a record's form acts on (Fixed).
	fixed bool
}

// Label is the field's name in words.
func (f draftField) Label() string {
	if l, ok := draftLabels[f.Name]; ok {
		return l
	}
	l := strings.ReplaceAll(f.Name, "_", " ")
	if l == "" {
		return l
	}
	return strings.ToUpper(l[:1]) + l[1:]
}

// Fixed: the field names what a record's form acts on (its domain), not
// something the person typed: it is sent again as it was, never edited.
func (f draftField) Fixed() bool { return f.fixed }

// Long: the field is edited in a text area.
func (f draftField) Long() bool {
	return f.Name == "payload" || strings.Contains(f.Value, "\n") || len(f.Value) > 80
}

// draftLabels are the words of the console's form fields.
var draftLabels = map[string]string{
	"payload":            "Corrected payload (JSON)",
	"reason":             "Reason",
	"reveal_reason":      "Reason for reading the payload",
	"meaning":            "Meaning of your signature",
	"case_id":            "Case id",
	"dlq_id":             "DLQ id",
	"dlq_ids":            "DLQ ids",
	"domain":             "Domain",
	"party":              "Party",
	"codes":              "Error codes",
	"include_validation": "Replay without a correction",
}

// drafts are the kept drafts by token, bounded.
type drafts struct {
	mu  sync.Mutex
	lru *simplelru.LRU[string, *draft]
}

func newDrafts() *drafts {
	l, _ := simplelru.NewLRU[string, *draft](maxDrafts, nil)
	return &drafts{lru: l}
}

// keep stores d and returns its token.
func (ds *drafts) keep(d *draft) string {
	tok := randomToken()
	ds.mu.Lock()
	ds.lru.Add(tok, d)
	ds.mu.Unlock()
	return tok
}

// take returns and forgets the draft of tok when it is user's and fresh
// at now (another person's draft is forgotten, not shown).
func (ds *drafts) take(tok, user string, now time.Time) *draft {
	ds.mu.Lock()
	d, ok := ds.lru.Get(tok)
	if ok {
		ds.lru.Remove(tok)
	}
	ds.mu.Unlock()
	if !ok || d.user != user || now.Sub(d.at) > draftTTL {
		return nil
	}
	return d
}

// len is the number of drafts kept.
func (ds *drafts) len() int {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return ds.lru.Len()
}

// keepDraft keeps the form of a POST whose session ended by idleness and
// sets the browser's draft cookie; false when there is nothing to keep
// for this request (no ended session of this browser, an unreadable or
// too large form).
func (p *loginPages) keepDraft(w http.ResponseWriter, r *http.Request) bool {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return false
	}
	user := p.sessions.expiredUser(ck.Value)
	if user == "" || r.ParseForm() != nil {
		return false
	}
	d := &draft{user: user, path: r.URL.Path, at: p.now()}
	size := 0
	for _, name := range sortedKeys(r.PostForm) {
		if name == csrfField || name == "password" {
			continue // never kept
		}
		for _, v := range r.PostForm[name] {
			size += len(name) + len(v)
			d.fields = append(d.fields, draftField{Name: name, Value: v})
		}
	}
	if size > maxDraftBytes {
		return false
	}
	setCookie(w, draftCookie, p.drafts.keep(d), int(draftTTL/time.Second))
	p.log.Info("session ended: form kept for after the login", "user", user, "path", d.path)
	return true
}

// draftData is the draft page.
type draftData struct {
	Path   string
	Back   string
	Fields []draftField
	// Password: the form signs (an approval) and asks the password
	// again.
	Password bool
	// Record is the record the form acts on (a record page's form), and
	// Action what it does to it, in words ("correction").
	Record, Action string
}

// draftTarget is the record a form's path acts on and the action in
// words ("" when the path is no record's form).
func draftTarget(path string) (id, action string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) != 3 || parts[0] != "records" || parts[1] == "bulk" {
		return "", ""
	}
	id, err := url.PathUnescape(parts[1])
	if err != nil {
		return "", ""
	}
	switch parts[2] {
	case "correct", "check":
		return id, "A correction"
	case "redrive":
		return id, "A redrive"
	case "release":
		return id, "A release"
	case "dismiss":
		return id, "A dismissal"
	case "hold":
		return id, "A legal hold"
	case "reveal":
		return id, "A payload read"
	}
	return id, "A request"
}

// handleDraft shows the person's kept form again, to check and send.
func (p *loginPages) handleDraft(w http.ResponseWriter, r *http.Request, s *session) {
	ck, err := r.Cookie(draftCookie)
	var d *draft
	if err == nil {
		d = p.drafts.take(ck.Value, s.user, p.now())
	}
	setCookie(w, draftCookie, "", -1)
	if d == nil {
		s.setFlash("Nothing typed before the login was kept.")
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	data := &draftData{Path: d.path, Back: pageOf(d.path), Fields: d.fields, Password: strings.HasSuffix(d.path, "/approve")}
	data.Record, data.Action = draftTarget(d.path)
	if data.Record != "" {
		data.Fields = slices.Clone(d.fields)
		for i := range data.Fields {
			data.Fields[i].fixed = data.Fields[i].Name == "domain"
		}
	}
	v := newView(s, "Continue where you were", "", data)
	v.Notice = "Your session ended before this was sent, so nothing was done. What you typed is below: check it and send it again."
	p.render(w, r, http.StatusOK, "draft", v)
}

// pageOf is the page a POST-only path belongs to (where a GET of it, from
// history or a restored tab, is sent, and where its outcome is shown).
func pageOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && (parts[0] == "records" || parts[0] == "approvals" || parts[0] == "drains"):
		return "/" + parts[0] + "/" + url.PathEscape(parts[1])
	case len(parts) >= 1 && (parts[0] == "drains" || parts[0] == "audit" || parts[0] == "holds" || parts[0] == "records"):
		return "/" + parts[0]
	}
	return "/"
}

// handleGetOfPost answers a GET of a POST-only path (a result page in the
// history, a restored tab) with its page instead of 405.
func handleGetOfPost(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, pageOf(r.URL.Path), http.StatusSeeOther)
}
