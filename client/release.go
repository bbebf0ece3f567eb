package client

import (
	"fmt"
	"time"

	"github.com/ldpsql/ldpsql/mechanisms"
)

// Meta is what a file of releases records about how they were made, beside a CSV file (FILE.meta.json)
// or inside a Parquet file (key-value metadata ldpsql.releases): what `ldpsql privatize` and the Beam
// transform write and `ldpsql import-releases` checks. The fields are in the order of their JSON keys.
type Meta struct {
	Eps        float64   `json:"eps"`
	EpsX       float64   `json:"eps_x"`
	EpsY       float64   `json:"eps_y"`
	K          int       `json:"k"`
	Label      string    `json:"label"`
	Lambda     float64   `json:"lambda"`
	Mechanism  string    `json:"mechanism"`
	SHA256     string    `json:"mechanism_sha256"` // of the .ldpm file
	ModelSHA   string    `json:"model_sha256"`     // of the encoder's model in it, which the server holds too
	Randomiser string    `json:"randomiser"`
	ReleasedAt time.Time `json:"released_at,omitzero"` // left out where unknown (a table ldp_export writes)
	Rows       int       `json:"rows"`
}

// Releaser releases rows as ldp_privatize does: the features through the mechanism at ε_x, and with a
// label the label by k-ary randomised response at ε_y, where ε_x = λ·ε and ε_y = (1 − λ)·ε (without a
// label ε_x = ε). It holds no state between calls and is safe for concurrent use.
type Releaser struct {
	M          *Mechanism
	Randomiser string
	Eps        float64
	// Label names the label column ("" for none); K and Lambda matter only with one.
	Label      string
	K          int
	Lambda     float64
	EpsX, EpsY float64
	krr        *mechanisms.KRR
}

// NewReleaser checks the parameters (a known randomiser, 0 < λ < 1 and K ≥ 2 with a label, both ε's
// within the randomisers' bounds) and returns the releaser.
func NewReleaser(m *Mechanism, randomiser string, eps float64, label string, k int, lambda float64) (*Releaser, error) {
	r := &Releaser{M: m, Randomiser: randomiser, Eps: eps, Label: label, K: k, Lambda: lambda, EpsX: eps}
	if label != "" {
		if !(lambda > 0 && lambda < 1) {
			return nil, fmt.Errorf("lambda %v: want 0 < λ < 1", lambda)
		}
		r.EpsX, r.EpsY = lambda*eps, (1-lambda)*eps
		var err error
		if r.krr, err = mechanisms.NewKRR(r.EpsY, k); err != nil {
			return nil, fmt.Errorf("the label (k %d, ε_y %v): %w", k, r.EpsY, err)
		}
	}
	if r.EpsX < mechanisms.MinEpsilon || r.EpsX > mechanisms.MaxEpsilon {
		return nil, fmt.Errorf("eps %v: the features' ε %v is outside [2⁻⁵⁰, %v]", eps, r.EpsX, mechanisms.MaxEpsilon)
	}
	if _, err := mechanisms.NewRandomiser(randomiser, m.set, r.EpsX); err != nil {
		return nil, err
	}
	return r, nil
}

// Caveat is mechanisms.RandomiserCaveat for r's randomiser, set and ε_x: a sentence saying the randomiser
// adds far more noise than another would (Duchi on an l1 ball), or "". The release is eps-LDP either way.
func (r *Releaser) Caveat() string {
	return mechanisms.RandomiserCaveat(r.Randomiser, r.M.set, r.EpsX)
}

// Release releases a batch: the features of every row (Mechanism.Privatise at ε_x), then, with a
// label, each row's label by k-RR at ε_y, drawing in that order from src. labels is ignored without a
// label column and must hold a class 0..K−1 for each row with one.
func (r *Releaser) Release(xs [][]float32, labels []int, src mechanisms.Source) (z [][]float64, y []int, err error) {
	if z, err = r.M.Privatise(xs, r.Randomiser, r.EpsX, src); err != nil {
		return nil, nil, err
	}
	if r.krr == nil {
		return z, nil, nil
	}
	if len(labels) != len(xs) {
		return nil, nil, fmt.Errorf("%d labels for %d rows", len(labels), len(xs))
	}
	y = make([]int, len(labels))
	for i, l := range labels {
		if y[i], err = r.krr.Randomise(l, src); err != nil {
			return nil, nil, err
		}
	}
	return z, y, nil
}

// Meta is the metadata of rows releases made by r, released now.
func (r *Releaser) Meta(rows int) Meta {
	k, lambda := r.K, r.Lambda
	return Meta{Mechanism: r.M.File.Name, SHA256: r.M.File.SHA256, ModelSHA: r.M.File.ArtifactSHA256, Randomiser: r.Randomiser,
		Eps: r.Eps, EpsX: r.EpsX, EpsY: r.EpsY, K: k, Lambda: lambda, Label: r.Label, Rows: rows, ReleasedAt: time.Now().UTC()}
}

// TableMeta is what a table of releases records in its comment under the key "ldp_privatize", so that
// TRAIN_NOISY_CLASSIFIER and PREDICT know how its rows were noised: what ldp_privatize writes
// (udf.PrivatizeMetadata is this type), and what import-releases and the Beam job's --to-db write for
// releases made outside the server.
type TableMeta struct {
	Source      string  `json:"source"`
	Mechanism   string  `json:"mechanism"`
	Randomiser  string  `json:"randomiser"`
	Epsilon     float64 `json:"eps"`
	Lambda      float64 `json:"lambda"`
	EpsX        float64 `json:"eps_x"`
	EpsY        float64 `json:"eps_y"`
	K           int     `json:"K,omitempty"`
	FeaturesCol string  `json:"features_col"`
	LabelCol    string  `json:"label_col,omitempty"`
	OutputDim   int     `json:"output_dim"`
	OutputSet   string  `json:"output_set"`
	// The digests a release file carries (ldp_export, ldpsql privatize and import-releases): the
	// SHA-256 of the mechanism's model and of the .ldpm file the releases were made with, or, for
	// ldp_privatize, of the mechanism as registered. Empty in tables written before they were
	// recorded.
	MechanismSHA256 string `json:"mechanism_sha256,omitempty"`
	ModelSHA256     string `json:"model_sha256,omitempty"`
}
