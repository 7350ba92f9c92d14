package console

import (
	"html"
	"net/url"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/api"
)

// TestDocumentPage: a shipment is one thing to look at. The Records page
// of one document (?document=SHA) lists every event of it by position
// with its outcome, a quarantined one linked with its code, whose link
// keeps the document filter; the by-document groups' code links keep the
// document, and each links its page; partner-given text is escaped.
func TestDocumentPage(t *testing.T) {
	const sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	doc := api.GroupDocument{ID: "SHIP-4812 <script>x</script>", SHA256: sha, Events: 4, Sender: "Müller & Söhne", Receiver: "陈伟 Pharmacy"}
	d := &recordsData{Q: recordsQuery{Document: sha, Sort: "quarantined_at", Dir: "desc"}, Columns: recordColumns,
		Document: &api.DocumentOutcomes{Document: doc, Counts: map[string]int{"committed": 2, "open": 1, "duplicate": 1},
			Events: []api.DocumentEvent{{Index: 0, Outcome: "committed"}, {Index: 1, Outcome: "open", DLQID: "dscsa_0123", ErrorCode: "INVALID_EPC"},
				{Index: 2, Outcome: "duplicate"}, {Index: 3, Outcome: "committed"}}}}
	page := renderPage(t, "records", d, nil)
	codeLink := html.EscapeString(d.Q.URL("/records", "code", "INVALID_EPC", "cursor", ""))
	for _, want := range []string{`id="document-view"`, `id="document-outcomes"`, `<input type="hidden" name="document" value="` + sha + `">`,
		"committed 2", "open 1", "duplicate 1", `<tr class="outcome-open"><td>2</td><td>open</td>`, `href="/records/dscsa_0123"`,
		`href="` + codeLink + `"`, "Müller &amp; Söhne", "陈伟 Pharmacy"} {
		if !strings.Contains(page, want) {
			t.Errorf("the document page lacks %q", want)
		}
	}
	if u, _ := url.Parse(html.UnescapeString(codeLink)); u.Query().Get("document") != sha || u.Query().Get("code") != "INVALID_EPC" {
		t.Errorf("the code link %q drops the document", codeLink)
	}
	if strings.Contains(page, "<script>x") {
		t.Error("a document id unescaped")
	}

	g := api.Group{Fingerprint: "document:" + sha, Domain: "dscsa", Total: 1, Open: 1, ByCode: map[string]int{"INVALID_EPC": 1},
		Samples: []string{"dscsa_0123"}, Document: &doc}
	page = renderPage(t, "groups", &groupsData{ByDocument: true, Groups: []api.Group{g}}, nil)
	for _, want := range []string{
		`href="` + html.EscapeString(recordsURL("domain", "dscsa", "code", "INVALID_EPC", "document", sha)) + `"`,
		`href="` + html.EscapeString(recordsURL("document", sha)) + `"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the groups by document lack %q", want)
		}
	}
}
