package schemas

import "testing"

func TestExamples(t *testing.T) {
	for _, d := range []string{"pharmacy", "dscsa", "fsma"} {
		ex, err := Examples(d)
		if err != nil {
			t.Fatal(err)
		}
		var valid, invalid int
		for _, e := range ex {
			switch {
			case e.Valid && e.Code == "":
				valid++
			case !e.Valid && e.Code != "":
				invalid++
			default:
				t.Errorf("%s/%s: valid=%v code=%q", d, e.Name, e.Valid, e.Code)
			}
		}
		if valid < 15 || invalid < 25 {
			t.Errorf("%s: %d valid, %d invalid examples; want at least 15 and 25", d, valid, invalid)
		}
	}
	if _, err := Examples("widgets"); err == nil {
		t.Error("an unknown domain has examples")
	}
}
