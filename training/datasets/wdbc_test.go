package datasets

import (
	"math"
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

func TestWDBCStandardisedRows(t *testing.T) {
	d, err := LoadWDBC()
	if err != nil {
		t.Fatal(err)
	}
	all := make([]int, len(d.Labels))
	for i := range all {
		all[i] = len(all) - 1 - i // reversed: the order is the caller's
	}
	rows := d.StandardisedRows(all)
	for j := range d.Features[0] {
		var s, s2 float64
		for _, r := range rows {
			s += float64(r[j])
			s2 += float64(r[j]) * float64(r[j])
		}
		mean, msq := s/float64(len(rows)), s2/float64(len(rows))
		if math.Abs(mean) > 1e-6 || math.Abs(msq-1) > 1e-5 {
			t.Fatalf("feature %d: mean %v, mean square %v; want 0 and 1", j, mean, msq)
		}
	}
	if got := d.StandardisedRows([]int{568, 0}); len(got) != 2 || got[0][3] != rows[0][3] || got[1][3] != rows[568][3] {
		t.Fatalf("rows {568, 0}: %v", got)
	}
}
