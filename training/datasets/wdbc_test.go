package datasets

import (
	"strings"
	"testing"
)

func TestLoadWDBC(t *testing.T) {
	d, err := LoadWDBC()
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Labels) != 569 || len(d.Features[0]) != 30 {
		t.Fatalf("%d rows × %d features", len(d.Labels), len(d.Features[0]))
	}
	benign := 0
	for _, y := range d.Labels {
		benign += y
	}
	// The published class distribution: 212 malignant, 357 benign.
	if benign != 357 {
		t.Fatalf("%d benign rows, want 357", benign)
	}
	if d.Features[0][0] != 17.99 {
		t.Fatalf("first feature %v, want 17.99", d.Features[0][0])
	}
}

func TestReadWDBCErrors(t *testing.T) {
	for _, bad := range []string{
		"",
		"2,30,a,b\n1,2\n",
		"1,30,a,b\n" + strings.Repeat("1,", 30) + "7\n",
		"2,30,a,b\n" + strings.Repeat("1,", 30) + "0\n",
	} {
		if _, err := ReadWDBC(strings.NewReader(bad)); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}
