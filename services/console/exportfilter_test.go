package console

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/deadletter/deadletter/shared/access"
	"github.com/deadletter/deadletter/shared/api"
)

// TestExportTakesEveryFilter (issue #39): the Audit page's export form
// sends every filter audit.export takes, in every domain, to the auditor
// (which refuses a field the domain does not search by, naming it: proof
// that the field reached it); a link (the Records page's "Export these
// records") fills the form in, never running it; the Records page links
// its view's export filters.
func TestExportTakesEveryFilter(t *testing.T) {
	e := startEnv(t)
	c := e.newConsole(t, nil)
	insp := access.DefaultPerson(access.RoleInspector)
	cl := newClient(t, c, "127.0.0.67")
	token := cl.mustLogin(insp, e.password(insp))
	const lot = `39&"B"<7> 陈伟`

	for _, tc := range []struct {
		name, field string
		form        url.Values
	}{
		{"an NDC in FSMA", "ndc", url.Values{"domain": {"fsma"}, "ndc": {"0409-4888-20"}}},
		{"a TLC in pharmacy", "tlc", url.Values{"domain": {"pharmacy"}, "tlc": {lot}}},
		{"a registrant in DSCSA", "registrant", url.Values{"domain": {"dscsa"}, "registrant": {"BW4829137"}}},
		{"an SSCC in pharmacy", "sscc", url.Values{"domain": {"pharmacy"}, "sscc": {"106141411234567897"}}},
		{"an identifier not name=value", "identifier", url.Values{"identifier": {"lot"}}},
		{"a time that does not read", "from", url.Values{"from": {"yesterday-ish"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.form.Set("csrf", token)
			tc.form.Set("format", "jsonl")
			tc.form.Set("reason", "FDA recall <2026-39> & Müller")
			w := cl.do(http.MethodPost, "/audit/export", tc.form)
			body := html.UnescapeString(w.Body.String())
			if w.Code != http.StatusBadRequest || !strings.Contains(body, api.ErrBadRequest) || !strings.Contains(body, "("+tc.field+")") {
				t.Errorf("export %v: %d, want BAD_REQUEST naming %s\n%.600s", tc.form, w.Code, tc.field, body)
			}
			if cd := w.Header().Get("Content-Disposition"); cd != "" {
				t.Errorf("a refused export was sent as a download (%s)", cd)
			}
			// The form keeps what was typed.
			for k, v := range tc.form {
				if k != "csrf" && k != "format" && !strings.Contains(body, `value="`+v[0]+`"`) {
					t.Errorf("the refused form lost %s=%q", k, v[0])
				}
			}
		})
	}

	t.Run("a lot of no event in every domain: an empty JSONL, not a refusal", func(t *testing.T) {
		w := cl.do(http.MethodPost, "/audit/export", url.Values{"csrf": {token}, "lot": {lot}, "format": {"jsonl"}, "reason": {"recall"}})
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"end":{"chains":0`) {
			t.Errorf("export of a lot of no event: %d %.300s", w.Code, w.Body)
		}
	})

	t.Run("the access audit names the export's filter", func(t *testing.T) {
		page := html.UnescapeString(cl.do(http.MethodGet, "/audit?access_user="+insp, nil).Body.String())
		if !strings.Contains(page, "filter lot="+lot) {
			t.Errorf("the access audit does not name the lot of the export:\n%s", page)
		}
	})

	t.Run("a link fills the form in", func(t *testing.T) {
		q := url.Values{"domain": {"dscsa"}, "lot": {lot}, "gtin": {"00614141123452"}, "sscc": {"106141411234567897"}, "party": {"0614141000005"}}
		page := cl.do(http.MethodGet, "/audit?"+q.Encode(), nil).Body.String()
		for _, id := range []string{"x-domain", "x-lot", "x-gtin", "x-sscc", "x-party", "x-ndc", "x-tlc", "x-serial", "x-registrant", "x-txid", "x-identifier"} {
			if !strings.Contains(page, `id="`+id+`"`) {
				t.Errorf("the export form has no %s", id)
			}
		}
		if !strings.Contains(page, `id="x-lot" name="lot" value="`+html.EscapeString(lot)+`"`) && !strings.Contains(page, `value="39&amp;&#34;B&#34;&lt;7&gt; 陈伟"`) {
			t.Errorf("the lot is not filled in, escaped:\n%s", page)
		}
	})

	t.Run("the Records page links its filter's export", func(t *testing.T) {
		page := cl.do(http.MethodGet, "/records?"+url.Values{"lot": {lot}, "domain": {"pharmacy"}, "code": {"INVALID_QUANTITY"}}.Encode(), nil).Body.String()
		i := strings.Index(page, `id="export-view"`)
		if i < 0 {
			t.Fatal("no export link on the Records page")
		}
		link := html.UnescapeString(page[strings.LastIndex(page[:i], `href="`)+6 : i])
		u, err := url.Parse(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(link), `"`)))
		if err != nil || u.Path != "/audit" || u.Query().Get("lot") != lot || u.Query().Get("domain") != "pharmacy" || u.Query().Has("code") {
			t.Errorf("the export link %q", link)
		}
		if !strings.Contains(page, "an export takes no class, code") {
			t.Error("the link does not say the export is wider than a view filtered by code")
		}
	})
}
