package client

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ldpsql/ldpsql/mechanisms"
	"github.com/ldpsql/ldpsql/plugins/builtin/identity/idenc"
	"github.com/ldpsql/ldpsql/plugins/builtin/pca/pcaenc"
	"github.com/ldpsql/ldpsql/training/clm"
	"github.com/ldpsql/ldpsql/training/datasets"
	"github.com/ldpsql/ldpsql/training/taskaware"
	"github.com/ldpsql/ldpsql/training/vlm"
)

func wdbcRows(t *testing.T) ([][]float32, []float64) {
	t.Helper()
	d, err := datasets.LoadWDBC()
	if err != nil {
		t.Fatal(err)
	}
	labels := make([]float64, len(d.Labels))
	for i, y := range d.Labels {
		labels[i] = float64(y)
	}
	return d.MinMaxRows(), labels
}

func stream(rows [][]float32) func() ([][]float32, error) {
	done := false
	return func() ([][]float32, error) {
		if done {
			return nil, io.EOF
		}
		done = true
		return rows, nil
	}
}

// models fits or trains one model of every built-in kind on WDBC and returns their files' contents with
// the in-process encoders, keyed by plugin.
func models(t *testing.T) map[string]struct {
	file []byte
	enc  encoder
	set  mechanisms.OutputSet
} {
	rows, labels := wdbcRows(t)
	out := map[string]struct {
		file []byte
		enc  encoder
		set  mechanisms.OutputSet
	}{}
	add := func(plugin string, art []byte, enc encoder, set mechanisms.OutputSet, dim int) {
		f, err := Marshal(File{Name: "m_" + plugin, Plugin: plugin, InputDim: 30, OutputDim: dim, Set: SetOf(set), Artifact: art,
			Params: json.RawMessage(`{}`), TrainedOn: "ldpsql.aux", Rows: int64(len(rows)), ExportedAt: time.Unix(0, 0).UTC()})
		if err != nil {
			t.Fatal(err)
		}
		out[plugin] = struct {
			file []byte
			enc  encoder
			set  mechanisms.OutputSet
		}{f, enc, set}
	}
	p, err := pcaenc.FitRows(pcaenc.Params{D: 4, L: 2}, rows)
	if err != nil {
		t.Fatal(err)
	}
	art, _ := p.Artifact()
	add("pca", art, p, mechanisms.L1Ball{D: 4, Radius: 2}, 4)
	id, err := idenc.Fit(30, stream(rows))
	if err != nil {
		t.Fatal(err)
	}
	art, _ = id.Artifact()
	lo, hi := make([]float64, 30), make([]float64, 30)
	for j := range lo {
		lo[j], hi[j] = float64(id.Lo[j]), float64(id.Hi[j])
	}
	add("identity", art, id, mechanisms.Box{Lo: lo, Hi: hi}, 30)
	v, err := vlm.Train(context.Background(), vlm.Config{D: 3, L: 4, EpsPretrain: 10, Hidden: []int{16}, Epochs: 2}, rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	art, _ = v.MarshalBinary()
	add("vlm", art, v, mechanisms.L1Ball{D: 3, Radius: 4}, 3)
	c := taskaware.DefaultTrainConfig()
	c.Label, c.Eps, c.Epochs, c.TaskEpochs = "y", 5, 3, 20
	ta, err := taskaware.Train(context.Background(), c, rows, labels, nil)
	if err != nil {
		t.Fatal(err)
	}
	art, _ = ta.Artifact()
	add("task_aware", art, ta, mechanisms.L1Ball{D: 3, Radius: ta.Radius}, 3)
	cl, err := clm.Train(context.Background(), clm.Config{D: 4, L: 3, EpsPretrain: 20, Hidden: []int{16}, Epochs: 2}, rows, nil)
	if err != nil {
		t.Fatal(err)
	}
	art, _ = cl.MarshalBinary()
	add("clm", art, cl, mechanisms.L1Ball{D: 4, Radius: 3}, 4)
	return out
}

// A file of every built-in kind loads, encodes bit for bit like the model it was made from, and
// privatises exactly as the server's release does with the same noise source: the float32 encoding
// in float64, through mechanisms.NewRandomiser(name, the declared set, ε).Randomise.
func TestFilesPrivatiseLikeTheServer(t *testing.T) {
	rows, _ := wdbcRows(t)
	rows = rows[:50]
	for plugin, m := range models(t) {
		mech, err := Load(m.file)
		if err != nil {
			t.Fatalf("%s: %v", plugin, err)
		}
		got, err := mech.Encode(rows)
		if err != nil {
			t.Fatal(err)
		}
		want, err := m.enc.Encode(rows)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			for j := range got[i] {
				if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
					t.Fatalf("%s: row %d encodes differently", plugin, i)
				}
			}
		}
		for _, name := range []string{mechanisms.RandomiserLaplace, mechanisms.RandomiserDuchi} {
			rel, err := mech.Privatise(rows, name, 3, mechanisms.NewSeededSource(7))
			if err != nil {
				t.Fatal(err)
			}
			rnd, err := mechanisms.NewRandomiser(name, m.set, 3)
			if err != nil {
				t.Fatal(err)
			}
			src := mechanisms.NewSeededSource(7)
			for i, z := range want {
				x := make([]float64, len(z))
				for j, v := range z {
					x[j] = float64(v)
				}
				r, err := rnd.Randomise(x, src)
				if err != nil {
					t.Fatal(err)
				}
				for j := range r {
					if math.Float64bits(r[j]) != math.Float64bits(rel[i][j]) {
						t.Fatalf("%s/%s: row %d released %v, the server's path %v", plugin, name, i, rel[i], r)
					}
				}
			}
		}
	}
}

// Corrupted or edited files are refused: a flipped byte anywhere, a changed model under a recomputed
// file digest, a declared set that is not the model's (even with every digest recomputed), an unknown
// plugin, a wrong format.
func TestTamperedFilesAreRefused(t *testing.T) {
	m := models(t)["pca"]
	var f File
	if err := json.Unmarshal(m.file, &f); err != nil {
		t.Fatal(err)
	}
	reseal := func(g File) []byte {
		b, err := Marshal(g)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	flipped := []byte(strings.Replace(string(m.file), `"trained_on": "ldpsql.aux"`, `"trained_on": "ldpsql.aux2"`, 1))
	bigger := f
	bigger.Set.Radius *= 2
	otherArt := f
	otherArt.Artifact = f.Artifact[:len(f.Artifact)/2] // digests resealed: the model itself fails to decode
	noArtDigest := []byte(strings.Replace(string(reseal(f)), f.ArtifactSHA256, strings.Repeat("0", 64), 1))
	unknown := f
	unknown.Plugin = "mystery"
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"edited field":         {flipped, "SHA-256 does not match its contents"},
		"other declared set":   {reseal(bigger), "its model gives"},
		"corrupted model":      {reseal(otherArt), "unexpected end of JSON"},
		"model digest changed": {noArtDigest, "does not match"},
		"unknown plugin":       {reseal(unknown), "cannot run outside the server"},
		"not a file":           {[]byte(`{"format": "x"}`), "format"},
	} {
		if _, err := Load(c.data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
	if _, err := Load(m.file); err != nil {
		t.Fatalf("the untouched file: %v", err)
	}
}
