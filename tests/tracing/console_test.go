package tracing

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/deadletter/deadletter/services/deadletter/stack"
	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/domain/dscsa"
	"github.com/deadletter/deadletter/shared/natstest"
	"github.com/deadletter/deadletter/tests/internal/jaeger"
)

// TestConsoleDrawsTheTrace: the console's record page draws the failure's
// trace from the real Jaeger's query API: its services, its spans (the
// validation that failed, the quarantine) and the error code, with no
// payload value; a trace id Jaeger does not have is said so on the page.
func TestConsoleDrawsTheTrace(t *testing.T) {
	natstest.Long(t, "Jaeger")
	j := jaeger.Start(t)
	pub := provider(t, j, publisherService)
	s := startStack(t, func(c *stack.Config) {
		c.Validator.TracerProvider = provider(t, j, validatorService)
		c.Quarantiner.TracerProvider = provider(t, j, quarantinerService)
		c.ConsoleAddr = "127.0.0.1:0"
		c.Console.JaegerURL = j.QueryURL
	})
	js, pubjs := connect(t, s, access.Admin), connect(t, s, string(access.RolePublisher))
	bad := example(t, "dscsa/invalid/GTIN_CHECK_DIGIT_FAILED--digital-link-bad-check.json", "events.dscsa.shipping",
		string(dscsa.GTINCheckDigitFailed), "PO-778120", markerPO)
	failed := publish(t, pubjs, pub, "events.dscsa.shipping", bad)
	rec := quarantined(t, js, failed.seq)
	waitTrace(t, j, failed.traceID, func(tr jaeger.Trace) error {
		return need(tr, quarantinerService, "send quarantine.", 1)
	})

	viewer := access.DefaultPerson(access.RoleViewer)
	page := consoleGet(t, s, viewer, "records/"+rec.DLQID)
	for _, want := range []string{
		`<h2 id="h-trace">Trace</h2>`, failed.traceID,
		"<strong>" + publisherService + "</strong>", "<strong>" + validatorService + "</strong>", "<strong>" + quarantinerService + "</strong>",
		"send events.dscsa.shipping", "validate events.dscsa.shipping", "send dlq.intake.dscsa", "quarantine dlq.intake.dscsa",
		`<code class="bad">` + string(dscsa.GTINCheckDigitFailed) + `</code>`, `<svg class="waterfall"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the record page lacks %q", want)
		}
	}
	if strings.Contains(page, markerPO) {
		t.Error("the record page shows a payload value")
	}
	if strings.Contains(page, "cannot be shown here") {
		t.Errorf("the page says the trace cannot be shown: %s", excerpt(page, "cannot be shown here"))
	}
	// Parents before children: the publish, then validate, then quarantine.
	iPub, iVal, iQ := strings.Index(page, "send events.dscsa.shipping"), strings.Index(page, "validate events.dscsa.shipping"), strings.Index(page, "quarantine dlq.intake.dscsa")
	if !(iPub < iVal && iVal < iQ) {
		t.Errorf("span order publish %d, validate %d, quarantine %d", iPub, iVal, iQ)
	}
}

// consoleGet logs user in to the stack's console over HTTP and GETs path.
func consoleGet(tb testing.TB, s *running, user, path string) string {
	tb.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		tb.Fatal(err)
	}
	cl := &http.Client{Jar: jar, Timeout: 60 * time.Second}
	base := s.Console.URL()
	login := httpGet(tb, cl, base+"login")
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(login)
	if m == nil {
		tb.Fatalf("no CSRF token on the login page:\n%s", login)
	}
	resp, err := cl.PostForm(base+"login", url.Values{"csrf": {m[1]}, "user": {user}, "password": {s.Secrets().Users[user].Password}})
	if err != nil {
		tb.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("login as %s: HTTP %d", user, resp.StatusCode)
	}
	return httpGet(tb, cl, base+path)
}

func httpGet(tb testing.TB, cl *http.Client, u string) string {
	tb.Helper()
	resp, err := cl.Get(u)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: HTTP %d\n%s", u, resp.StatusCode, b)
	}
	return string(b)
}

// excerpt is the text around the first s in page.
func excerpt(page, s string) string {
	i := strings.Index(page, s)
	return page[max(0, i-300):min(len(page), i+300)]
}
